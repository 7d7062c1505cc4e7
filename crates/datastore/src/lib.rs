//! The Datastore trait.
