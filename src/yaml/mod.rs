//! Safe YAML for untrusted task files: parsing with size, depth, node and alias budgets into a
//! JSON value with the source position of every node (`parse`), writing values back as block
//! YAML (`emit`), and replacing coordinator- and agent-owned top-level blocks without touching a
//! byte people own (`splice`). Pure: no I/O.

mod emit;
mod parse;
mod splice;

#[cfg(test)]
mod props;

pub use emit::{emit_block, emit_scalar};
pub use parse::{parse, parse_bytes, Doc, Limits, Pos, TopKey, YamlError};
pub use splice::{remove_block, set_block, SpliceError};

/// Escapes one JSON-pointer token (`~` → `~0`, `/` → `~1`).
pub fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
