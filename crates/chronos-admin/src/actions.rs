//! Actions on one task (run now, delete, archive, cancel, a new level, an edit), and what
//! their outcomes mean to the caller.

use chronos_broker::{
    ActionOutcome, Inspect, ManageSchedules, Operate, Priority, Schedules, TaskAction, TaskEdit,
};

use crate::admin::Admin;
use crate::error::AdminError;

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Applies `action` to one task. Ok(false) when it already was done (the task already
    /// pending, archived, or its cancel already asked); an error when the queue or the task is
    /// missing (for every action, delete included: a mistyped id must not read as success),
    /// refused or corrupt.
    pub async fn act(&self, name: &str, id: &str, action: TaskAction) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        outcome(
            name,
            id,
            verb(action),
            self.broker.act(&q, id, action).await?,
        )
    }

    /// Gives task `id` priority level `priority` (see `Operate::prioritize`). Ok(false) when
    /// it already had that level; an error when the queue or the task is missing, when the
    /// task is active or completed (refused), or corrupt.
    pub async fn prioritize(
        &self,
        name: &str,
        id: &str,
        priority: Priority,
    ) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        outcome(
            name,
            id,
            "prioritize",
            self.broker.prioritize(&q, id, priority).await?,
        )
    }

    /// Edits waiting task `id`'s payload, run time and/or level in one atomic step (see
    /// `Operate::edit`, which says where an edited task lands). Ok(false) when the task already
    /// was as asked (also when a call re-sent after a lost reply finds its first run's work
    /// done). A task that already started (active), finished (completed) or died (archived:
    /// run it first) is [`AdminError::Refused`] with its state and the action `edit`, and
    /// nothing changes; [`AdminError::TaskNotFound`], [`AdminError::QueueNotFound`] and
    /// [`AdminError::Corrupt`] as for the other actions; an empty edit, a payload over the
    /// limit or a typed payload of another kind is an [`AdminError::Broker`].
    pub async fn edit(&self, name: &str, id: &str, edit: &TaskEdit) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        outcome(name, id, "edit", self.broker.edit(&q, id, edit).await?)
    }
}

/// What an operator action's outcome means to the caller: Ok(true) done, Ok(false) already
/// so, else the error naming queue `name`, task `id` and the action (`verb`).
fn outcome(name: &str, id: &str, verb: &'static str, o: ActionOutcome) -> Result<bool, AdminError> {
    match o {
        ActionOutcome::Done => Ok(true),
        ActionOutcome::Already => Ok(false),
        ActionOutcome::NotFound => Err(AdminError::TaskNotFound {
            queue: name.to_string(),
            id: id.to_string(),
        }),
        ActionOutcome::Refused(state) => Err(AdminError::Refused {
            id: id.to_string(),
            state: state
                .map_or("in an unknown state", |s| s.as_str())
                .to_string(),
            action: verb,
        }),
        ActionOutcome::Corrupt => Err(AdminError::Corrupt { id: id.to_string() }),
    }
}

/// The action as a verb, for messages.
pub fn verb(action: TaskAction) -> &'static str {
    match action {
        TaskAction::RunNow => "run now",
        TaskAction::Delete => "delete",
        TaskAction::Archive => "archive",
        TaskAction::Cancel => "cancel",
    }
}
