use crate::caches::Caches;
use crate::keys::Labels;

pub struct Context {
    pub caches: Caches,
    pub labels: Labels,
}

#[cfg(test)]
mod tests {
    use super::*;
}
