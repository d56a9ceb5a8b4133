use crate::caches::Caches;

pub struct Context {
    pub caches: Caches,
}
