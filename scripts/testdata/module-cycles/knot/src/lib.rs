pub mod caches;
pub mod context;
pub mod keys;
