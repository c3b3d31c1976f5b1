//! The only code that touches `work/`: opening a repo's coord setup (config, schema),
//! loading a board from disk, applying transitions durably (journal, no-replace moves, atomic
//! writes) and recording them as commits, and recovering whatever a killed run left half done.

mod apply;
mod attempts;
pub use apply::{Applied, Origin, Recorded};
pub use attempts::Deepen;
pub use load::Loaded;
mod cache;
mod clean;
mod edit;
#[cfg(test)]
mod faults;
mod gates;
mod gh;
mod group;
mod history;
mod indexed;
mod load;
pub mod private;
mod quiet;
mod renames;
mod schedules;
mod scoped;
mod session;
pub use session::Session;
mod settle;
mod sightings;
pub use settle::Written;
mod skipped;
mod stats;
pub use stats::{RaceWon, Rejection, Stats};
mod walk;
#[cfg(test)]
pub(crate) use cache::StatKey;
pub use walk::{Walk, INBOX_WINDOW};

use crate::config::{Config, ConfigError};
use crate::fsx;
use crate::git::{GitError, Identity, Repo};
use crate::schema::{Schema, SchemaError};
use std::path::{Path, PathBuf};

/// Why the store could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A git failure.
    #[error(transparent)]
    Git(#[from] GitError),
    /// coord.yaml is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The repo's schema is unusable.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The journal of an interrupted run is unreadable.
    #[error("{}: unreadable journal of an interrupted run ({message}); inspect it, then delete it", path.display())]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// coord committed but could not write git's index for its commits (a full disk): the
    /// index is behind HEAD for coord's paths, and a person's `git commit` would undo them.
    #[error("git's index is behind coord's last commits for {work}/: once the disk has room, run 'git reset -q -- {work}' (or 'coord tick') before any 'git commit'")]
    IndexBehind {
        /// The work folder.
        work: String,
        /// Why the index was not written (or what stopped the commits first).
        #[source]
        cause: Box<StoreError>,
    },
    /// There is no work folder.
    #[error("{} does not exist; run 'coord init' first", path.display())]
    NoWorkDir {
        /// The expected folder.
        path: PathBuf,
    },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A repository opened for coord.
pub struct Store {
    /// The git repository.
    pub repo: Repo,
    /// The configuration.
    pub config: Config,
    /// The commit identity.
    pub identity: Identity,
    task_schema: Schema,
    /// The stat cache's salt: coord's version and the bytes of the task schema in force.
    schema_salt: u64,
    agent_schema: Schema,
    /// A digest of the stat keys of `coord.yaml` and the schema file, taken before they were
    /// read; None when one was too recent to trust (the quiet mark needs it).
    setup_keys: Option<u64>,
    /// The answers to the gates `gh` answers (the last answers are read once, then kept).
    gh: gh::GhGates,
    /// Files `coord watch` saw renamed in and not written since.
    seen_complete: std::collections::HashMap<String, Written>,
}

/// How a recording of external changes knew `work/` was clean, with its clean-mark state
/// (the quiet mark is made from it).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Clean {
    /// The clean mark vouched for it: the status scan was skipped.
    Marked(u64),
    /// The status scan found it clean.
    Scanned(u64),
    /// The status scan found it clean, but the walk cannot vouch for every file (a stamp
    /// too recent to trust): no clean mark.
    ScannedRecent,
    /// The vouch the last operation left in coord's private index held: the scan was
    /// skipped; with the clean-mark state when the walk can vouch for every file.
    Vouched(Option<u64>),
    /// The walk's stat data matched what the index recorded, and the index's tree for
    /// `work/` is HEAD's: the scan was skipped; with the clean-mark state when the walk can
    /// vouch for every file.
    Indexed(Option<u64>),
}

impl Clean {
    /// Returns the clean-mark state, when the recording computed one.
    fn state(self) -> Option<u64> {
        match self {
            Clean::Marked(state)
            | Clean::Scanned(state)
            | Clean::Vouched(Some(state))
            | Clean::Indexed(Some(state)) => Some(state),
            Clean::Vouched(None) | Clean::Indexed(None) | Clean::ScannedRecent => None,
        }
    }
}

/// The trailer that marks a commit the tick derived from the files alone (no person's or
/// agent's input in it), so that `coord sync` may drop it and tick again on a newer base.
pub const TICK_TRAILER: &str = "Coord-Origin: tick";

impl Store {
    /// Opens the repository containing `dir` with its coord.yaml and schema.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let repo = Repo::discover(dir)?;
        let root = repo.workdir().to_path_buf();
        for rel in quiet::SETUP_FILES {
            fsx::refuse_symlink(&root, rel).map_err(io_err(&root.join(rel)))?;
        }
        let setup_keys = setup_keys(&root);
        let config = Config::load(&root.join("coord.yaml"))?;
        let identity = Identity::parse(&config.commit.author)?;
        let schema_path = root.join("schemas/task.schema.json");
        let schema_text = Schema::read_repo_file(&schema_path)?;
        let schema_salt = cache::salt(schema_text.as_deref().unwrap_or_default().as_bytes());
        let proven = cache::written_under(&repo.git_dir().join(cache::PATH), schema_salt);
        let task_schema = Schema::task_for_repo(schema_text.as_deref(), &schema_path, proven)?;
        let gh = gh::GhGates::new(
            &root,
            &repo.git_dir().join("coord"),
            config.gate_interval.to_signed(),
        );
        Ok(Store {
            gh,
            repo,
            config,
            identity,
            task_schema,
            schema_salt,
            agent_schema: Schema::builtin_agent(),
            setup_keys,
            seen_complete: Default::default(),
        })
    }

    /// Returns the work tree root.
    pub fn root(&self) -> &Path {
        self.repo.workdir()
    }

    /// Returns the absolute path of a repo-relative path.
    pub fn abs(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Returns the work folder, repo-relative.
    pub fn work_dir(&self) -> &str {
        &self.config.work_dir
    }

    /// Returns coord's private folder inside `.git/`.
    pub fn private_dir(&self) -> PathBuf {
        self.repo.git_dir().join("coord")
    }

    /// Reads a repo-relative file within `max` bytes, never following a symlink.
    pub fn read_file(&self, rel: &str, max: usize) -> Result<Vec<u8>, StoreError> {
        fsx::read_limited(self.root(), rel, max).map_err(io_err(&self.abs(rel)))
    }

    /// Returns the task schema in force (the repo's copy or the built-in one).
    pub fn task_schema(&self) -> &Schema {
        &self.task_schema
    }
}

impl Store {
    /// Returns the files a sparse checkout leaves out of the work tree that coord needs: the
    /// task files `scan` found flagged skip-worktree, and the setup files (coord.yaml, the
    /// task schema), without which coord would work from its defaults.
    pub fn left_out_of_work_tree(&self, scan: &crate::git::Changed) -> Vec<String> {
        let mut left_out = scan.skipped.clone();
        left_out.extend(self.repo.left_out_of_work_tree(&quiet::SETUP_FILES));
        left_out
    }

    /// Refuses when a sparse checkout left a setup file out of the work tree: a read-only
    /// check (`validate`, `tick --dry-run`) would judge the tasks by coord's defaults.
    pub fn refuse_setup_left_out(&self) -> Result<(), StoreError> {
        let left_out = self.repo.left_out_of_work_tree(&quiet::SETUP_FILES);
        if left_out.is_empty() {
            return Ok(());
        }
        Err(GitError::Unfinished(crate::git::Unfinished::SkippedInWorkTree(left_out)).into())
    }
}

/// Returns a digest of the stat keys of the setup files (`quiet::SETUP_FILES`), or None when
/// one is too recent to trust.
fn setup_keys(root: &Path) -> Option<u64> {
    let mut keys = Vec::new();
    clean::watched_keys(
        root,
        &quiet::SETUP_FILES,
        std::time::SystemTime::now(),
        &mut keys,
    )?;
    Some(crate::hash::checksum(&keys))
}
