//! A block's JSON in the two dialects found in etcd, read into the model's [`AllocationBlock`]
//! and written back in the dialect it was read in.
//!
//! | field | Calico 1.4 (libcalico 0.15) writes | we write (new blocks) |
//! | --- | --- | --- |
//! | no affinity | `"affinity": ""` (also once a 1.4 block gives its host up) | `"affinity": null` |
//! | strict flag | `"strict_affinity": true\|false` | `"strictAffinity": true` (absent when false) |
//! | attribute's handle | `"handle_id": "<id>"\|null`, `"secondary": {…}` always | `"primary": "<id>"`, `"secondary"` when set |
//! | free-address order | `"unallocated": [ordinals]` | the same |
//!
//! A block is rewritten with the spellings it was read with, its attributes byte-for-byte where
//! they are unchanged (secondary values need not be strings in 1.4), and fields we do not know
//! kept verbatim: Calico 1.4 reads back what it wrote, with the meaning it gave it. A block
//! without `unallocated` (written before libcalico 0.15) gets one, derived as Calico 1.4 derives
//! it: its free ordinals, lowest first.

use std::collections::BTreeMap;

use calico_model::Validate;
use calico_model::error::ValidationError;
use calico_model::ipam::{AllocationAttribute, AllocationBlock};
use serde_json::{Map, Value};

/// How one stored block spells what the dialects write differently.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dialect {
    /// The block had `strict_affinity` (Calico 1.4's spelling).
    snake_strict: bool,
    /// The block had `strictAffinity` (ours and libcalico-go's).
    camel_strict: bool,
    /// Attributes name their handle `handle_id` (Calico 1.4) rather than `primary` (ours).
    handle_id: bool,
    /// No affinity is written `""` (Calico 1.4) rather than `null` (ours).
    empty_affinity: bool,
    /// Fields neither dialect defines, kept as read.
    extra: Map<String, Value>,
    /// The attributes as read, each with the model's view of it.
    raw_attributes: Vec<(AllocationAttribute, Value)>,
}

impl Dialect {
    /// Whether the block was written by Calico 1.4: any of its spellings says so (1.4 always
    /// writes `strict_affinity`, and `handle_id` in every attribute). A 1.4 block that loses its
    /// host is written `"affinity": ""` even when it was read with a host, so that it never
    /// mixes the two dialects.
    fn calico_1_4(&self) -> bool {
        self.empty_affinity || self.snake_strict || self.handle_id
    }
}

/// Reads a block in either dialect and validates it; the error names the field.
pub fn parse_block(raw: &str) -> Result<(AllocationBlock, Dialect), ValidationError> {
    let mut fields: Map<String, Value> = serde_json::from_str(raw)
        .map_err(|e| ValidationError::object(format!("invalid JSON object: {e}")))?;
    let mut dialect = Dialect::default();
    let cidr = match fields.remove("cidr") {
        Some(Value::String(text)) => text
            .parse()
            .map_err(|_| ValidationError::new("cidr", format!("{text:?} is not a CIDR")))?,
        other => return Err(wrong_type("cidr", "a CIDR string", other.as_ref())),
    };
    let affinity = match fields.remove("affinity") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.is_empty() => {
            dialect.empty_affinity = true;
            None
        }
        Some(Value::String(text)) => Some(text),
        Some(other) => {
            return Err(wrong_type(
                "affinity",
                "\"host:<name>\" or \"\"",
                Some(&other),
            ));
        }
    };
    let strict_affinity = strict_flag(&mut fields, &mut dialect)?;
    let allocations = allocations(fields.remove("allocations"))?;
    let unallocated = match fields.remove("unallocated") {
        None | Some(Value::Null) => None,
        Some(value) => Some(ordinals("unallocated", value)?),
    };
    let raw_attributes = match fields.remove("attributes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(wrong_type("attributes", "a list", Some(&other))),
    };
    let mut attributes = Vec::new();
    for (index, raw) in raw_attributes.into_iter().enumerate() {
        let attribute = read_attribute(&raw, &mut dialect)
            .map_err(|e| e.within(&format!("attributes[{index}]")))?;
        attributes.push(attribute.clone());
        dialect.raw_attributes.push((attribute, raw));
    }
    dialect.extra = fields;
    let mut block = AllocationBlock {
        cidr,
        affinity,
        strict_affinity,
        allocations,
        unallocated,
        attributes,
    };
    block.validate()?;
    complete_unallocated(&mut block);
    Ok((block, dialect))
}

/// `strict_affinity` and/or `strictAffinity`: both are read; when both are present they agree.
fn strict_flag(
    fields: &mut Map<String, Value>,
    dialect: &mut Dialect,
) -> Result<bool, ValidationError> {
    let mut flag = |name: &str| match fields.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(wrong_type(name, "true or false", Some(&other))),
    };
    let snake = flag("strict_affinity")?;
    let camel = flag("strictAffinity")?;
    dialect.snake_strict = snake.is_some();
    dialect.camel_strict = camel.is_some();
    match (snake, camel) {
        (Some(s), Some(c)) if s != c => Err(ValidationError::new(
            "strict_affinity",
            format!("is {s} but strictAffinity is {c}; remove the one that is wrong"),
        )),
        (s, c) => Ok(s.or(c).unwrap_or(false)),
    }
}

fn allocations(value: Option<Value>) -> Result<Vec<Option<usize>>, ValidationError> {
    let Some(Value::Array(items)) = value else {
        return Err(wrong_type("allocations", "a list", value.as_ref()));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(ordinal, item)| match item {
            Value::Null => Ok(None),
            other => index(&other).map(Some).ok_or_else(|| {
                wrong_type(
                    &format!("allocations[{ordinal}]"),
                    "null or an attribute index",
                    Some(&other),
                )
            }),
        })
        .collect()
}

fn ordinals(field: &str, value: Value) -> Result<Vec<usize>, ValidationError> {
    let Value::Array(items) = value else {
        return Err(wrong_type(field, "a list of ordinals", Some(&value)));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            index(item)
                .ok_or_else(|| wrong_type(&format!("{field}[{i}]"), "an ordinal", Some(item)))
        })
        .collect()
}

fn index(value: &Value) -> Option<usize> {
    usize::try_from(value.as_u64()?).ok()
}

/// One attribute: the handle under `handle_id` or `primary` (both read; they must agree when
/// both are there), details under `secondary` (any JSON values; shown as text).
fn read_attribute(
    raw: &Value,
    dialect: &mut Dialect,
) -> Result<AllocationAttribute, ValidationError> {
    let Value::Object(fields) = raw else {
        return Err(wrong_type("", "an object", Some(raw)));
    };
    let handle = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(other) => Err(wrong_type(name, "a handle id or null", Some(other))),
    };
    let (by_id, primary) = (handle("handle_id")?, handle("primary")?);
    dialect.handle_id |= fields.contains_key("handle_id");
    if let (Some(a), Some(b)) = (&by_id, &primary)
        && a != b
    {
        let reason = format!("is {a:?} but primary is {b:?}; remove the one that is wrong");
        return Err(ValidationError::new("handle_id", reason));
    }
    let secondary = match fields.get("secondary") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => {
            Some(map.iter().map(|(k, v)| (k.clone(), as_text(v))).collect())
        }
        Some(other) => return Err(wrong_type("secondary", "an object", Some(other))),
    };
    Ok(AllocationAttribute {
        primary: by_id.or(primary),
        secondary,
    })
}

fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn wrong_type(field: &str, expected: &str, found: Option<&Value>) -> ValidationError {
    let reason = match found {
        None => format!("missing; expected {expected}"),
        Some(value) => format!("expected {expected}, found {value}"),
    };
    ValidationError::new(field, reason)
}

/// Gives a block without `unallocated` its free ordinals lowest first (as Calico 1.4 does), and
/// appends free ordinals a partial list leaves out, so that every free address can be handed out.
pub fn complete_unallocated(block: &mut AllocationBlock) {
    let order = block.unallocated.get_or_insert_with(Vec::new);
    let mut listed = vec![false; block.allocations.len()];
    for &ordinal in order.iter() {
        listed[ordinal] = true;
    }
    for (ordinal, entry) in block.allocations.iter().enumerate() {
        if entry.is_none() && !listed[ordinal] {
            order.push(ordinal);
        }
    }
}

/// The block's JSON in `dialect`.
pub fn render_block(block: &AllocationBlock, dialect: &Dialect) -> String {
    let mut out = Map::new();
    out.insert("cidr".into(), Value::String(block.cidr.to_string()));
    let affinity = match (&block.affinity, dialect.calico_1_4()) {
        (Some(affinity), _) => Value::String(affinity.clone()),
        (None, true) => Value::String(String::new()),
        (None, false) => Value::Null,
    };
    out.insert("affinity".into(), affinity);
    let strict = Value::Bool(block.strict_affinity);
    if dialect.snake_strict {
        out.insert("strict_affinity".into(), strict.clone());
    }
    if dialect.camel_strict || (!dialect.snake_strict && block.strict_affinity) {
        out.insert("strictAffinity".into(), strict);
    }
    out.insert(
        "allocations".into(),
        serde_json::to_value(&block.allocations).expect("ordinals serialise"),
    );
    if let Some(order) = &block.unallocated {
        out.insert(
            "unallocated".into(),
            serde_json::to_value(order).expect("ordinals serialise"),
        );
    }
    let attributes = block
        .attributes
        .iter()
        .map(|a| render_attribute(a, dialect))
        .collect();
    out.insert("attributes".into(), Value::Array(attributes));
    for (name, value) in &dialect.extra {
        out.insert(name.clone(), value.clone());
    }
    Value::Object(out).to_string()
}

/// An attribute as read when unchanged, else in the block's dialect.
fn render_attribute(attribute: &AllocationAttribute, dialect: &Dialect) -> Value {
    if let Some((_, raw)) = dialect.raw_attributes.iter().find(|(a, _)| a == attribute) {
        return raw.clone();
    }
    let secondary = |map: &BTreeMap<String, String>| {
        Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    };
    let mut out = Map::new();
    if dialect.handle_id {
        let handle = attribute.primary.clone().map_or(Value::Null, Value::String);
        out.insert("handle_id".into(), handle);
        let details = attribute
            .secondary
            .as_ref()
            .map_or(Value::Object(Map::new()), secondary);
        out.insert("secondary".into(), details);
    } else {
        if let Some(handle) = &attribute.primary {
            out.insert("primary".into(), Value::String(handle.clone()));
        }
        if let Some(details) = &attribute.secondary {
            out.insert("secondary".into(), secondary(details));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(raw: &str) -> String {
        let error = parse_block(raw).unwrap_err();
        format!("{error}")
    }

    const CALICO_1_4: &str = r#"{"cidr": "10.0.0.0/30", "strict_affinity": true,
        "affinity": "", "allocations": [null, 0, null, null], "unallocated": [3, 0, 2],
        "attributes": [{"handle_id": null, "secondary": {"n": 1.5, "x": "y"}}]}"#;

    #[test]
    fn a_calico_1_4_block_is_written_back_as_it_was_read() {
        let (block, dialect) = parse_block(CALICO_1_4).unwrap();
        assert_eq!(
            (block.affinity.as_deref(), block.strict_affinity),
            (None, true)
        );
        assert_eq!(block.attributes[0].secondary.as_ref().unwrap()["n"], "1.5");
        let written: Value = serde_json::from_str(&render_block(&block, &dialect)).unwrap();
        assert_eq!(written, serde_json::from_str::<Value>(CALICO_1_4).unwrap());
    }

    #[test]
    fn a_calico_1_4_block_that_gives_its_host_up_says_so_in_1_4_spelling() {
        let with_host = CALICO_1_4.replace(r#""affinity": """#, r#""affinity": "host:node1""#);
        let (mut block, dialect) = parse_block(&with_host).unwrap();
        block.affinity = None;
        let written: Value = serde_json::from_str(&render_block(&block, &dialect)).unwrap();
        assert_eq!(written["affinity"], "");
        assert_eq!(written["strict_affinity"], true);
        assert!(written.get("strictAffinity").is_none(), "{written}");
    }

    #[test]
    fn our_new_blocks_use_our_spelling() {
        let block = crate::block::empty_block("10.0.0.0/31".parse().unwrap(), None, true);
        let written = render_block(&block, &Dialect::default());
        assert_eq!(
            written,
            r#"{"cidr":"10.0.0.0/31","affinity":null,"strictAffinity":true,"allocations":[null,null],"unallocated":[0,1],"attributes":[]}"#
        );
    }

    #[test]
    fn contradictions_and_wrong_types_name_the_field() {
        let both = CALICO_1_4.replace(
            r#""strict_affinity": true"#,
            r#""strict_affinity": true, "strictAffinity": false"#,
        );
        assert_eq!(
            field_of(&both),
            "strict_affinity: is true but strictAffinity is false; remove the one that is wrong"
        );
        let handles = CALICO_1_4.replace(
            r#""handle_id": null"#,
            r#""handle_id": "a", "primary": "b""#,
        );
        assert!(field_of(&handles).starts_with("attributes[0].handle_id: is \"a\" but primary"));
        let negative = CALICO_1_4.replace("[null, 0, null, null]", "[null, -1, null, null]");
        assert_eq!(
            field_of(&negative),
            "allocations[1]: expected null or an attribute index, found -1"
        );
        let secondary = CALICO_1_4.replace(r#"{"n": 1.5, "x": "y"}"#, "[1]");
        assert_eq!(
            field_of(&secondary),
            "attributes[0].secondary: expected an object, found [1]"
        );
        let taken = CALICO_1_4.replace("[3, 0, 2]", "[3, 1]");
        assert_eq!(field_of(&taken), "unallocated[1]: ordinal 1 is allocated");
    }

    #[test]
    fn a_partial_free_list_is_completed_lowest_first() {
        let raw = CALICO_1_4.replace("[3, 0, 2]", "[3]");
        let (block, _) = parse_block(&raw).unwrap();
        assert_eq!(block.unallocated, Some(vec![3, 0, 2]));
    }
}
