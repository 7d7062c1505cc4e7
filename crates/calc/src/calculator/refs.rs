//! Users counted per key: an entry lives while it has users.

use std::collections::HashMap;

/// One more user of `id`.
pub(super) fn count_up<K, Q>(refs: &mut HashMap<K, usize>, id: &Q)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: ToOwned<Owned = K> + std::hash::Hash + Eq + ?Sized,
{
    match refs.get_mut(id) {
        Some(count) => *count += 1,
        None => {
            refs.insert(id.to_owned(), 1);
        }
    }
}

/// One user fewer of `id`; the entry goes with its last user.
pub(super) fn count_down<K, Q>(refs: &mut HashMap<K, usize>, id: &Q)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    if let Some(count) = refs.get_mut(id) {
        *count -= 1;
        if *count == 0 {
            refs.remove(id);
        }
    }
}
