//! Regular expressions the rules check again and again, kept instead of compiled each time.
//!
//! Compiling a pattern costs tens of microseconds, more than everything else an admission
//! review does, and the same few patterns come back on every review: a ClusterProvider's
//! `namespaceRegexes` for each ExternalSecret in a namespace it refuses, the `find` and
//! `rewrite` regexps of each manifest applied again.
//!
//! Both memos are bounded because patterns come from objects: a memo holds at most
//! [`MAX_ENTRIES`] patterns of at most [`MAX_PATTERN_BYTES`] each, and starts over when full;
//! a longer pattern is compiled each time, as before. Only operator-owned patterns (cluster-scoped
//! namespace conditions) keep their compiled form, whose size the pattern does not bound; for
//! the patterns a tenant writes, only whether they compile is kept.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use regex::Regex;

/// Patterns a memo holds before it starts over.
pub const MAX_ENTRIES: usize = 1024;
/// Longer patterns are not kept.
pub const MAX_PATTERN_BYTES: usize = 1024;

struct Memo<V> {
    entries: Mutex<HashMap<String, V>>,
}

impl<V: Clone> Memo<V> {
    fn new() -> Self {
        Memo { entries: Mutex::new(HashMap::new()) }
    }

    fn get_or(&self, pattern: &str, make: impl FnOnce() -> V) -> V {
        if pattern.len() > MAX_PATTERN_BYTES {
            return make();
        }
        if let Some(v) = self.entries.lock().unwrap_or_else(PoisonError::into_inner).get(pattern) {
            return v.clone();
        }
        // Compiled outside the lock: a slow pattern does not hold up the others.
        let v = make();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(pattern.to_string(), v.clone());
        v
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

static COMPILED: LazyLock<Memo<Result<Arc<Regex>, regex::Error>>> = LazyLock::new(Memo::new);
static CHECKED: LazyLock<Memo<Option<regex::Error>>> = LazyLock::new(Memo::new);

/// `pattern` compiled, kept for the next call: for operator-owned patterns only.
pub fn compiled(pattern: &str) -> Result<Arc<Regex>, regex::Error> {
    COMPILED.get_or(pattern, || Regex::new(pattern).map(Arc::new))
}

/// Why `pattern` does not compile, or `None` when it does. Only the answer is kept.
pub fn compile_error(pattern: &str) -> Option<regex::Error> {
    CHECKED.get_or(pattern, || Regex::new(pattern).err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_patterns_match_as_compiled_ones_and_are_shared() {
        let a = compiled("^team-[a-z]+$").unwrap();
        let b = compiled("^team-[a-z]+$").unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the second call reuses the first compilation");
        assert!(a.is_match("team-a") && !a.is_match("team-1"));
        assert!(compiled("(").is_err());
    }

    #[test]
    fn compile_errors_are_the_regex_crates() {
        assert!(compile_error("^db-").is_none());
        // Built at run time so the pattern is not checked at compile time.
        let invalid = ["a", "{2"].concat();
        let e = compile_error(&invalid).expect("invalid");
        assert_eq!(Some(e.to_string()), Regex::new(&invalid).err().map(|e| e.to_string()));
        assert_eq!(compile_error(&invalid).map(|e| e.to_string()), Some(e.to_string()), "the same answer again");
    }

    #[test]
    fn a_memo_stays_bounded_and_skips_long_patterns() {
        let memo = Memo::new();
        let mut made = 0;
        for i in 0..MAX_ENTRIES + 10 {
            memo.get_or(&format!("p{i}"), || {
                made += 1;
                made
            });
        }
        assert!(memo.len() <= MAX_ENTRIES, "{} entries", memo.len());
        assert_eq!(made, MAX_ENTRIES + 10);

        let long = "x".repeat(MAX_PATTERN_BYTES + 1);
        let before = memo.len();
        assert_eq!(memo.get_or(&long, || 7), 7);
        assert_eq!(memo.get_or(&long, || 8), 8, "a long pattern is made each time");
        assert_eq!(memo.len(), before);

        assert_eq!(memo.get_or("p-last", || 1), 1);
        assert_eq!(memo.get_or("p-last", || 2), 1, "a kept pattern is not made again");
    }
}
