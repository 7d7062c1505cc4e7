//! A batch body → records, each validated on its own: a malformed or hostile record is refused
//! by its field path and reason, and the others of the batch go on.

use calico_flowlog::protocol::Refusal;
use calico_model::ValidationError;
use calico_model::flow::FlowRecord;
use serde::Deserialize;
use serde_json::value::RawValue;

/// What a batch holds, checked: the valid records (with their index and their text as sent,
/// which the store keeps) and the refusals.
#[derive(Debug, Default)]
pub struct Checked<'a> {
    pub records: Vec<(usize, FlowRecord, &'a str)>,
    pub refused: Vec<Refusal>,
}

/// The limits a batch is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Records beyond this index are refused.
    pub max_records: usize,
    /// Seconds a record may end after the aggregator's clock.
    pub max_skew: u64,
}

#[derive(Deserialize)]
struct RawBatch<'a> {
    #[serde(borrow)]
    records: Vec<&'a RawValue>,
}

/// Why a body is no batch at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the body is not a batch {{\"records\": [...]}}: {0}")]
pub struct NotABatch(String);

/// Reads a batch; `now` is the aggregator's clock in unix seconds.
pub fn check(body: &[u8], limits: BatchLimits, now: u64) -> Result<Checked<'_>, NotABatch> {
    let batch: RawBatch = serde_json::from_slice(body).map_err(|e| NotABatch(e.to_string()))?;
    let mut checked = Checked::default();
    let total = batch.records.len();
    for (index, raw) in batch.records.into_iter().enumerate() {
        let at = format!("records[{index}]");
        if index >= limits.max_records {
            let reason = format!(
                "the batch has {total} records, the limit is {}: send the rest in another batch",
                limits.max_records
            );
            checked
                .refused
                .push(refusal(index, ValidationError::object(reason).within(&at)));
            continue;
        }
        match record(raw.get(), limits.max_skew, now) {
            Ok(record) => checked.records.push((index, record, raw.get())),
            Err(error) => checked.refused.push(refusal(index, error.within(&at))),
        }
    }
    Ok(checked)
}

fn record(text: &str, max_skew: u64, now: u64) -> Result<FlowRecord, ValidationError> {
    let record: FlowRecord = calico_model::from_json(text)?;
    let ahead = record.end_time.saturating_sub(now);
    if ahead > max_skew {
        let reason = format!(
            "{} is {ahead} s ahead of the aggregator's clock, the limit is {max_skew}: check the \
             reporter's clock",
            record.end_time
        );
        return Err(ValidationError::new("end_time", reason));
    }
    Ok(record)
}

fn refusal(index: usize, error: ValidationError) -> Refusal {
    Refusal {
        index,
        field: error.field,
        reason: error.reason,
    }
}

/// The top-level field a refusal is about (`records[3].source.key` → `source`), `record` for
/// the record as a whole: a label of bounded cardinality for the metrics.
pub fn refused_field(refusal: &Refusal) -> &str {
    let rest = refusal.field.split_once("].").map_or("", |(_, rest)| rest);
    let top = rest.split(['.', '[']).next().unwrap_or_default();
    match top {
        "" => "record",
        known if FIELDS.contains(&known) => known,
        _ => "other",
    }
}

/// A record's top-level fields.
const FIELDS: [&str; 16] = [
    "reporter",
    "start_time",
    "end_time",
    "source",
    "destination",
    "protocol",
    "dst_port",
    "direction",
    "action",
    "policies",
    "packets_in",
    "bytes_in",
    "packets_out",
    "bytes_out",
    "connections_started",
    "\"\"",
];

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BatchLimits = BatchLimits {
        max_records: 2,
        max_skew: 300,
    };

    #[test]
    fn bodies_that_are_no_batch_are_refused_whole() {
        for body in ["", "[]", "{\"records\": 3}", "{\"records\": [1,", "null"] {
            let error = check(body.as_bytes(), LIMITS, 0).unwrap_err();
            assert!(
                error.to_string().starts_with("the body is not a batch"),
                "{error}"
            );
        }
    }

    #[test]
    fn records_are_refused_one_by_one() {
        let body = br#"{"records": [{"reporter": 1}, "text", {}, {}]}"#;
        let checked = check(body, LIMITS, 0).unwrap();
        assert!(checked.records.is_empty());
        let refused: Vec<String> = checked.refused.iter().map(ToString::to_string).collect();
        assert_eq!(refused.len(), 4, "{refused:?}");
        assert!(
            refused[0].starts_with("records[0].reporter: invalid type"),
            "{refused:?}"
        );
        assert!(
            refused[1].starts_with("records[1]: invalid type"),
            "{refused:?}"
        );
        assert!(
            refused[3].contains("the batch has 4 records, the limit is 2"),
            "{refused:?}"
        );
        assert_eq!(refused_field(&checked.refused[0]), "reporter");
        assert_eq!(refused_field(&checked.refused[1]), "record");
    }
}
