//! Reading multi-document YAML (or JSON) files, `-` being stdin.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// One document of a file.
#[derive(Debug, Clone)]
pub struct Document {
    /// `file` or `file#N` (N from 1) when the file holds several documents.
    pub source: String,
    /// The document.
    pub value: Value,
}

impl Document {
    /// `kind` of the document.
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        self.value.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty())
    }
}

/// The text of `path`, or of stdin for `-`.
pub fn read_text(path: &Path) -> Result<String, Error> {
    let read = |source| Error::Read { path: path.to_path_buf(), source };
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(read)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).map_err(read)
    }
}

/// The documents of a file; empty documents are skipped.
pub fn documents(path: &Path) -> Result<Vec<Document>, Error> {
    let name = if path == Path::new("-") { "<stdin>".to_string() } else { path.display().to_string() };
    parse(&name, &read_text(path)?)
}

/// The documents of `text`, read from `name`. A `List` (what `kubectl get -o yaml` prints) counts
/// as its items.
pub fn parse(name: &str, text: &str) -> Result<Vec<Document>, Error> {
    let mut values = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc)
            .map_err(|e| Error::Manifest { path: format!("{name}#{}", i + 1), message: e.to_string() })?;
        if value.is_null() {
            continue;
        }
        if value.get("kind").and_then(Value::as_str) == Some("List")
            && let Some(items) = value.get("items").and_then(Value::as_array)
        {
            values.extend(items.iter().cloned());
        } else {
            values.push(value);
        }
    }
    let several = values.len() > 1;
    Ok(values
        .into_iter()
        .enumerate()
        .map(|(i, value)| Document { source: if several { format!("{name}#{}", i + 1) } else { name.into() }, value })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lists_and_empty_documents() {
        let docs = parse("f.yaml", "---\na: 1\n---\n---\nkind: List\nitems: [{kind: X}, {kind: Y}]\n").unwrap();
        let kinds: Vec<&str> = docs.iter().map(Document::kind).collect();
        assert_eq!(kinds, ["", "X", "Y"]);
        assert_eq!(docs[2].source, "f.yaml#3");
        let one = parse("g.json", "{\"kind\": \"Z\", \"metadata\": {\"name\": \"n\"}}").unwrap();
        assert_eq!((one[0].source.as_str(), one[0].name()), ("g.json", "n"));
        let err = parse("h.yaml", "a: [\n").unwrap_err().to_string();
        assert!(err.starts_with("h.yaml#1: "), "{err}");
    }
}
