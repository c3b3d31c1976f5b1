//! Failure injection for tests: under `cfg(test)`, [`point`] counts the filesystem and git
//! operations of the store on the current thread and fails the Nth one, so a test can sweep N
//! over a whole tick, or fails the next operation of a given name (`fail_on`), or that one and
//! every one after it, as a kill -9 would (`crash_on`), so a test can stop a run at one step. In every other build [`point`] is an empty inline function.

use std::io;

#[cfg(test)]
pub use hook::{count, crash_on, fail_at, fail_on, failed};

/// Marks one filesystem or git operation; fails it when a test asked for this one.
#[cfg(test)]
pub fn point(what: &str) -> io::Result<()> {
    if hook::hit(what) {
        return Err(io::Error::other(format!("injected failure: {what}")));
    }
    Ok(())
}

/// Marks one filesystem or git operation (no-op outside tests).
#[cfg(not(test))]
#[inline(always)]
pub fn point(_what: &str) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod hook {
    use std::cell::{Cell, RefCell};

    thread_local! {
        static FAIL_AT: Cell<Option<usize>> = const { Cell::new(None) };
        static COUNT: Cell<usize> = const { Cell::new(0) };
        static FAIL_ON: Cell<Option<(&'static str, usize)>> = const { Cell::new(None) };
        static FAILED: RefCell<Option<String>> = const { RefCell::new(None) };
        static CRASHED: Cell<bool> = const { Cell::new(false) };
        static STICKY: Cell<bool> = const { Cell::new(false) };
    }

    /// Makes the `nth` operation named `what` from now fail, and every operation after it, as
    /// if the process had died there (a kill -9 between two steps); `None` turns it off.
    pub fn crash_on(what: Option<(&'static str, usize)>) {
        fail_on(what);
        CRASHED.with(|c| c.set(false));
        STICKY.with(|s| s.set(what.is_some()));
    }

    /// Returns the name of the operation made to fail since the last `fail_at`, if any.
    pub fn failed() -> Option<String> {
        FAILED.with(|f| f.borrow().clone())
    }

    /// Makes the `nth` operation named `what` from now fail (once, 1-based); `None` turns it
    /// off.
    pub fn fail_on(what: Option<(&'static str, usize)>) {
        FAIL_ON.with(|f| f.set(what));
        STICKY.with(|s| s.set(false));
    }

    /// Makes the `n`th operation from now fail (1-based); `None` turns injection off.
    pub fn fail_at(n: Option<usize>) {
        FAIL_AT.with(|f| f.set(n));
        COUNT.with(|c| c.set(0));
        FAILED.with(|f| f.borrow_mut().take());
    }

    /// Returns how many operations ran since the last `fail_at`.
    pub fn count() -> usize {
        COUNT.with(Cell::get)
    }

    pub(super) fn hit(what: &str) -> bool {
        let n = COUNT.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        let named = FAIL_ON.with(|f| match f.get() {
            Some((name, nth)) if name == what => {
                f.set((nth > 1).then_some((name, nth - 1)));
                nth == 1
            }
            _ => false,
        });
        if named && STICKY.with(Cell::get) {
            CRASHED.with(|c| c.set(true));
        }
        let hit = named || CRASHED.with(Cell::get) || FAIL_AT.with(|f| f.get() == Some(n));
        if hit {
            FAILED.with(|f| *f.borrow_mut() = Some(what.to_string()));
        }
        hit
    }
}
