//! An entry's labels, kept compact: a B-tree map of a few labels takes a whole leaf (room for
//! 11 pairs, about 540 bytes), while the window only ever hands them back whole. So each side's
//! labels are kept as one sorted slice of boxed pairs, moved out of the record when it is
//! stored and rebuilt into a map only for the flows a query answers. No filter reads labels.

use calico_model::labels::LabelMap;

/// One side's labels, sorted by key (the map's order).
pub(super) type Labels = Box<[(Box<str>, Box<str>)]>;

/// Takes the labels out of `map` (left empty, so it holds no memory).
pub(super) fn take(map: &mut LabelMap) -> Labels {
    std::mem::take(map)
        .into_iter()
        .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
        .collect()
}

/// The map a record carries.
pub(super) fn to_map(labels: &Labels) -> LabelMap {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
