#[cfg(test)]
mod tests;

pub struct Labels;

pub fn of(c: &crate::context::Context) -> &Labels {
    &c.caches.labels
}
