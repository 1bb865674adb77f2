//! The answer of an action: a redirect back to the page it came from with a one-line notice,
//! signed so that a page shows only the notices this console wrote (pages read it with
//! `AppState::notice`). A leaf of the console's modules: actions and pages both answer with it.

use axum::response::{IntoResponse, Redirect, Response};

use crate::href::encode;
use crate::pages::login::safe_next;
use crate::state::AppState;

/// A redirect to `back` (a path of this console) with a signed one-line notice.
pub(crate) fn back_with(st: &AppState, back: &str, msg: &str) -> Response {
    let back = safe_next(back);
    let sep = if back.contains('?') { '&' } else { '?' };
    Redirect::to(&format!(
        "{back}{sep}msg={}&sig={}",
        encode(msg),
        st.sign(msg)
    ))
    .into_response()
}
