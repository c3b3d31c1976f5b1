//! The machine-readable codes coord writes into `coord.error` (docs/errors.md lists each; a
//! test checks the table against this enum). Agents may write codes of their own in a failure
//! result; those stay strings. Pure.

use std::fmt;

/// A reason coord records for a failed attempt or a task that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The lease ran out without a result.
    Timeout,
    /// The agent reported failure without a code of its own.
    AgentFailure,
    /// The agent's result cannot be accepted (schema, size).
    BadResult,
    /// An `input` expression could not be resolved at assignment.
    BadExpression,
    /// A dependency failed or was cancelled.
    DependencyFailed,
    /// A required signature is missing or wrong.
    BadSignature,
    /// A transition would grow the `coord:` block past the file size limit.
    TooLarge,
    /// A handoff would go past `max_handoffs`.
    HandoffLimit,
    /// A person rejected the task in review.
    Rejected,
    /// A person cancelled the task.
    Cancelled,
    /// The task vanished from the snapshot while it was being assigned.
    Gone,
}

impl ErrorCode {
    /// Every code, in the order docs/errors.md lists them.
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::Timeout,
        ErrorCode::AgentFailure,
        ErrorCode::BadResult,
        ErrorCode::BadExpression,
        ErrorCode::DependencyFailed,
        ErrorCode::BadSignature,
        ErrorCode::TooLarge,
        ErrorCode::HandoffLimit,
        ErrorCode::Rejected,
        ErrorCode::Cancelled,
        ErrorCode::Gone,
    ];

    /// Returns the code as written in task files.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Timeout => "timeout",
            ErrorCode::AgentFailure => "agent_failure",
            ErrorCode::BadResult => "bad_result",
            ErrorCode::BadExpression => "bad_expression",
            ErrorCode::DependencyFailed => "dependency_failed",
            ErrorCode::BadSignature => "bad_signature",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::HandoffLimit => "handoff_limit",
            ErrorCode::Rejected => "rejected",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Gone => "gone",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;
    use std::collections::BTreeSet;

    /// Returns the codes in the `code` column of the table in docs/errors.md.
    fn documented() -> BTreeSet<String> {
        let doc = include_str!("../../docs/errors.md");
        doc.lines()
            .filter(|l| l.starts_with('|'))
            .filter_map(|l| l.split('|').nth(2))
            .filter_map(|cell| {
                let code = cell.trim().strip_prefix('`')?;
                Some(code.split('`').next()?.to_string())
            })
            .filter(|c| c != "code")
            .collect()
    }

    #[test]
    fn docs_errors_md_lists_exactly_the_codes_coord_writes() {
        let ours: BTreeSet<String> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        let mut documented = documented();
        // An event, not an error: documented in the same table.
        documented.remove("stale_result");
        assert_eq!(documented, ours, "docs/errors.md and ErrorCode differ");
    }
}
