//! Where a transition starts and ends, as commit trailers (`Coord-From`, `Coord-To`) and the
//! journal name it: a task's state, or what a file that is not a task went through (`new` for a
//! created file, `agent` for a profile, `added`, `initialized`, `circuit <state>`).

use super::{Circuit, State};
use std::fmt;

/// One end of a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Endpoint {
    /// A task's state (its folder).
    State(State),
    /// Before a file existed (`new`).
    New,
    /// An agent profile, before coord updated it (`agent`).
    Agent,
    /// A profile `agents add` wrote (`added`).
    Added,
    /// The layout `init` wrote (`initialized`).
    Initialized,
    /// An agent's circuit after an update (`circuit open`).
    Circuit(Circuit),
}

impl Endpoint {
    /// Returns the state, when this end is a task's state.
    pub fn state(self) -> Option<State> {
        match self {
            Endpoint::State(s) => Some(s),
            _ => None,
        }
    }
}

impl schemars::JsonSchema for Endpoint {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Endpoint".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A task's state, or `new`, `agent`, `added`, `initialized`, `circuit <state>`.",
            "type": "string"
        })
    }
}

impl From<State> for Endpoint {
    fn from(s: State) -> Endpoint {
        Endpoint::State(s)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::State(s) => f.write_str(s.as_str()),
            Endpoint::New => f.write_str("new"),
            Endpoint::Agent => f.write_str("agent"),
            Endpoint::Added => f.write_str("added"),
            Endpoint::Initialized => f.write_str("initialized"),
            Endpoint::Circuit(c) => write!(f, "circuit {}", c.as_str()),
        }
    }
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Endpoint, String> {
        let circuit = |c: &str| {
            [Circuit::Closed, Circuit::Open, Circuit::HalfOpen]
                .into_iter()
                .find(|k| k.as_str() == c)
        };
        match s {
            "new" => Ok(Endpoint::New),
            "agent" => Ok(Endpoint::Agent),
            "added" => Ok(Endpoint::Added),
            "initialized" => Ok(Endpoint::Initialized),
            _ => match s.strip_prefix("circuit ").map(circuit) {
                Some(Some(c)) => Ok(Endpoint::Circuit(c)),
                _ => State::parse(s)
                    .map(Endpoint::State)
                    .ok_or_else(|| format!("'{s}' is no transition endpoint")),
            },
        }
    }
}

impl PartialEq<&str> for Endpoint {
    /// Whether this end is written as `s` (in commit trailers and the journal).
    fn eq(&self, s: &&str) -> bool {
        s.parse::<Endpoint>().is_ok_and(|e| e == *self)
    }
}

impl From<Endpoint> for String {
    fn from(e: Endpoint) -> String {
        e.to_string()
    }
}

impl TryFrom<String> for Endpoint {
    type Error = String;

    fn try_from(s: String) -> Result<Endpoint, String> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_reads_back_as_it_is_written() {
        let mut all: Vec<Endpoint> = State::ALL.iter().map(|s| Endpoint::State(*s)).collect();
        all.extend([
            Endpoint::New,
            Endpoint::Agent,
            Endpoint::Added,
            Endpoint::Initialized,
        ]);
        all.extend([Circuit::Closed, Circuit::Open, Circuit::HalfOpen].map(Endpoint::Circuit));
        for e in all {
            assert_eq!(e.to_string().parse::<Endpoint>(), Ok(e), "{e}");
            let json = serde_json::to_string(&e).expect("json");
            assert_eq!(json, format!("\"{e}\""));
            assert_eq!(serde_json::from_str::<Endpoint>(&json).expect("back"), e);
        }
        assert!("circuit ajar".parse::<Endpoint>().is_err());
    }
}
