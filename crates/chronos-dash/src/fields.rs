//! Fields that several of the console's forms share, read one way everywhere: when a task
//! runs (`at`, a time read as UTC, or `in`, a delay) and its priority level (`level`). A field
//! sent blank counts as not sent.

use std::time::Duration;

use chronos_admin::{parse_run_at, parse_run_in, AdminError};
use chronos_broker::{Priority, Timestamp};

use crate::security::CheckedForm;

/// When a form says a task runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RunTime {
    /// At this time.
    At(Timestamp),
    /// This long from now.
    In(Duration),
}

/// The form's `at` or `in`; an error when it gives both or one does not parse.
pub(crate) fn run_time(form: &CheckedForm) -> Result<Option<RunTime>, AdminError> {
    match (given(form, "at"), given(form, "in")) {
        (Some(_), Some(_)) => Err(AdminError::Invalid(
            "give a run time or a delay, not both".into(),
        )),
        (Some(at), None) => Ok(Some(RunTime::At(parse_run_at(at)?))),
        (None, Some(d)) => Ok(Some(RunTime::In(parse_run_in(d)?))),
        (None, None) => Ok(None),
    }
}

/// The form's `level` (0 to 9); an error when it is not one.
pub(crate) fn level(form: &CheckedForm) -> Result<Option<Priority>, AdminError> {
    given(form, "level")
        .map(|l| {
            l.parse::<Priority>()
                .map_err(|e| AdminError::Invalid(e.to_string()))
        })
        .transpose()
}

/// A field's value, trimmed; None when absent or blank.
pub(crate) fn given<'a>(form: &'a CheckedForm, name: &str) -> Option<&'a str> {
    form.get(name).map(str::trim).filter(|v| !v.is_empty())
}
