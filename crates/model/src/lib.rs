//! The Calico etcd data model: typed keys of the seed keyspace, typed objects with validation,
//! and the selector language.
//!
//! | module | owns |
//! | --- | --- |
//! | `error` | `ValidationError` (field path + reason) and `from_json` for every object |
//! | `selector` | the selector language: parser, evaluator, canonical form |

pub mod error;
pub mod selector;

pub use error::{Validate, ValidationError, from_json};
