//! `--store none`: runs that need no history. Nothing is kept, so the runner does not
//! build checkpoint records at all (see [`Checkpointer::keeps_records`]), and a thread
//! that pauses cannot be resumed.

use super::{Checkpoint, Checkpointer, RunRecord, StoreError, ThreadRecord};

/// A store that keeps nothing: every thread is new, every read finds nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStore;

impl Checkpointer for NoStore {
    fn keeps_records(&self) -> bool {
        false
    }

    fn append(&self, _record: Checkpoint) -> Result<(), StoreError> {
        Ok(())
    }

    fn load(&self, _thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(Vec::new())
    }

    fn truncate(&self, _thread: &str, _seq: u64) -> Result<(), StoreError> {
        Ok(())
    }

    fn delete_thread(&self, _thread: &str) -> Result<(), StoreError> {
        Ok(())
    }

    fn put_thread(&self, _thread: &ThreadRecord) -> Result<(), StoreError> {
        Ok(())
    }

    fn get_thread(&self, _thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(None)
    }

    fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        Ok(Vec::new())
    }

    fn put_run(&self, _run: &RunRecord) -> Result<(), StoreError> {
        Ok(())
    }

    fn get_run(&self, _run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(None)
    }

    fn runs(&self, _thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    fn delete_run(&self, _run: &str) -> Result<(), StoreError> {
        Ok(())
    }

    fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }
}
