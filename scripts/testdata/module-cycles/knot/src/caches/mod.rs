use crate::{
    keys::{self, Labels as L},
};

pub struct Caches {
    pub labels: L,
}
