//! Where a task is in its life.

/// The lifecycle state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskState {
    /// In the stream, waiting for a worker.
    Pending,
    /// Held by a worker.
    Active,
    /// Waiting for its process-at time.
    Scheduled,
    /// Failed, waiting for its retry time.
    Retry,
    /// Dead-lettered and kept in the archive.
    Archived,
    /// Succeeded and kept for its retention period.
    Completed,
    /// Ended by its handler as cancelled ([`End::Cancelled`](crate::End::Cancelled)): no
    /// error and no dead letter; kept, with the reason, as long as the archive keeps dead
    /// letters.
    Cancelled,
}

impl TaskState {
    /// The name stored in Redis (`pending`, `active`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Active => "active",
            TaskState::Scheduled => "scheduled",
            TaskState::Retry => "retry",
            TaskState::Archived => "archived",
            TaskState::Completed => "completed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// Parses a stored state name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => TaskState::Pending,
            "active" => TaskState::Active,
            "scheduled" => TaskState::Scheduled,
            "retry" => TaskState::Retry,
            "archived" => TaskState::Archived,
            "completed" => TaskState::Completed,
            "cancelled" => TaskState::Cancelled,
            _ => return None,
        })
    }
}

/// As its stored name (`"pending"`, `"cancelled"`, ...), as the operator views print it.
impl serde::Serialize for TaskState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
