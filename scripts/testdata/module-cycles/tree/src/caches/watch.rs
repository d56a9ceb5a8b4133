// "crate::context::Context" in a string or a comment is not a path.
use super::Caches;

pub struct Watch(pub Caches);
