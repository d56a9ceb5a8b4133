mod watch;

use crate::Labels;
pub use watch::Watch;

pub struct Caches {
    pub labels: Labels,
}
