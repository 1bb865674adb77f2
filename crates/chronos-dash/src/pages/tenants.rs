//! The queue page's section on the tenants sharing the queue: the busiest by backlog with their
//! counts and settings, pause and resume per tenant (and for the default), and the form that
//! stores a tenant's (or the default's) weight and caps (posted to `actions::tenant_*`).

use chronos_admin::{TenantList, TenantRow, TenantSettingsRow};
use maud::{html, Markup};

use super::csrf;
use crate::format;
use crate::href::{encode, queue_href};
use crate::state::AppState;

/// Tenants the section lists: the busiest; the totals count the rest.
pub(crate) const LISTED: usize = 20;

/// What the form edits: a tenant (None: the default) and its stored settings.
pub(crate) struct Editing<'a> {
    pub(crate) tenant: Option<&'a str>,
    pub(crate) settings: TenantSettingsRow,
}

/// A stored value, else the default's (marked), else the built-in one (muted).
fn setting(own: Option<String>, default: Option<String>, builtin: &str) -> Markup {
    html! {
        @if let Some(v) = own {
            (v)
        } @else if let Some(v) = default {
            (v) span.muted title="the default for all tenants" { " (default)" }
        } @else {
            span.muted title="built-in" { (builtin) }
        }
    }
}

fn cap<T: ToString>(v: Option<T>) -> Option<String> {
    v.map(|n| n.to_string())
}

/// The path of the queue page with the form set to edit `tenant` (None: the default).
fn edit_href(queue: &str, tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("{}?tenant={}#tenant-form", queue_href(queue), encode(t)),
        None => format!("{}#tenant-form", queue_href(queue)),
    }
}

/// A pause or resume button for `tenant` (None: the default).
fn pause_button(
    st: &AppState,
    queue: &str,
    tenant: Option<&str>,
    paused: bool,
    back: &str,
) -> Markup {
    let what = if paused { "resume" } else { "pause" };
    html! {
        form.inline method="post" action={(queue_href(queue)) "/tenants/" (what)} {
            (csrf(st))
            input type="hidden" name="back" value=(back);
            input type="hidden" name="tenant" value=(tenant.unwrap_or(""));
            button.small type="submit" data-tenant-action=(what) {
                (what) @if tenant.is_none() { " all (default)" }
            }
        }
    }
}

fn row(st: &AppState, list: &TenantList, t: &TenantRow, now: i64, back: &str) -> Markup {
    let (own, def) = (&t.settings, &list.default);
    html! {
        tr data-tenant=(t.tenant) {
            td.mono { (t.tenant) }
            td.num data-t="waiting" { (format::thousands(t.waiting)) }
            td.num data-t="running" { (format::thousands(t.running)) }
            td.num data-t="oldest" { (super::overview::age(t.oldest_age_ms(now).map(|ms| (ms / 1000) as i64))) }
            td data-t="ready" { (if t.ready { "yes" } else { "no" }) }
            td.num data-t="weight" { (setting(cap(own.weight), cap(def.weight), "1")) }
            td.num data-t="concurrency" { (setting(cap(own.concurrency), cap(def.concurrency), "no cap")) }
            td.num data-t="backlog" { (setting(cap(own.backlog), cap(def.backlog), "no cap")) }
            td data-t="paused" {
                @if t.paused() {
                    span.badge.paused { "paused" }
                    @if own.paused.is_none() { span.muted { " (default)" } }
                } @else {
                    span.muted { "no" }
                }
            }
            @if !st.config.read_only {
                td.actions {
                    (pause_button(st, &list.queue, Some(&t.tenant), t.paused(), back))
                    " "
                    a.small href=(edit_href(&list.queue, Some(&t.tenant))) data-tenant-edit=(t.tenant) { "edit" }
                }
            }
        }
    }
}

/// The section, when the queue has tenants or a default stored for them.
pub(crate) fn section(
    st: &AppState,
    list: &TenantList,
    editing: &Editing<'_>,
    now: i64,
    back: &str,
) -> Markup {
    if list.is_empty() && editing.tenant.is_none() {
        return html! {};
    }
    let d = &list.default;
    html! {
        section #tenants {
            h2 { "Tenants" }
            p.muted #tenant-totals {
                (format::thousands(list.total)) " tenant" (if list.total == 1 { "" } else { "s" }) ": "
                (format::thousands(list.waiting)) " waiting, " (format::thousands(list.running)) " running"
                @if list.more() > 0 {
                    " · the " (list.tenants.len()) " with the most waiting are listed, "
                    (format::thousands(list.more())) " more are not"
                }
            }
            @if !list.tenants.is_empty() {
                table.grid #tenants-table {
                    thead {
                        tr {
                            th { "tenant" } th.num { "waiting" } th.num { "running" } th.num { "oldest waiting" }
                            th { "ready" } th.num { "weight" } th.num { "concurrency" } th.num { "backlog" } th { "paused" }
                            @if !st.config.read_only { th { } }
                        }
                    }
                    tbody {
                        @for t in &list.tenants { (row(st, list, t, now, back)) }
                    }
                }
            }
            p #tenant-default {
                "Default for all tenants: weight " (setting(cap(d.weight), None, "1"))
                " · concurrency " (setting(cap(d.concurrency), None, "no cap"))
                " · backlog " (setting(cap(d.backlog), None, "no cap"))
                " · " @if d.paused == Some(true) { span.badge.paused { "paused" } } @else { span.muted { "not paused" } }
                @if !st.config.read_only {
                    " "
                    (pause_button(st, &list.queue, None, d.paused == Some(true), back))
                    " "
                    a.small href=(edit_href(&list.queue, None)) { "edit" }
                }
            }
            p.muted {
                "A ready task of the queue starts in a weighted round-robin between the tenants that have one waiting, are under their concurrency cap and are not paused. "
                "A tenant's own settings override the default's, field by field; running servers apply a change at their next fetch."
            }
            @if !st.config.read_only { (form(st, &list.queue, editing, back)) }
        }
    }
}

fn form(st: &AppState, queue: &str, editing: &Editing<'_>, back: &str) -> Markup {
    let s = &editing.settings;
    let field = |name: &'static str,
                 v: Option<String>,
                 example: &'static str,
                 help: &'static str| {
        html! {
            tr {
                th { label for={"tenant-" (name)} { (name) } }
                td {
                    input type="text" id={"tenant-" (name)} name=(name)
                        value=(v.unwrap_or_default())
                        placeholder=(if editing.tenant.is_some() { "default" } else { "built-in" });
                }
                td.muted { (help) ", e.g. " code { (example) } }
            }
        }
    };
    html! {
        form #tenant-form method="post" action={(queue_href(queue)) "/tenants"} {
            (csrf(st))
            input type="hidden" name="back" value=(back);
            h3 {
                @if let Some(t) = editing.tenant { "Settings of tenant " span.mono { (t) } }
                @else { "Settings of the default for all tenants" }
            }
            table.grid {
                tbody {
                    tr {
                        th { label for="tenant-key" { "tenant" } }
                        td { input type="text" id="tenant-key" name="tenant" value=(editing.tenant.unwrap_or("")) placeholder="blank: the default for all"; }
                        td.muted { "the tenant key; blank changes the default for all tenants" }
                    }
                    (field("weight", cap(s.weight), "3", "share of starts relative to the other tenants (1 to 1000)"))
                    (field("concurrency", cap(s.concurrency), "5", "most tasks of the tenant running at once, cluster-wide"))
                    (field("backlog", cap(s.backlog), "1000", "most tasks of the tenant waiting; enqueues past it fail"))
                }
            }
            p.muted { "A blank field stores nothing: a tenant gets the default's value, the default the built-in one (weight 1, no cap)." }
            button.small type="submit" #tenant-save { "save tenant settings" }
        }
    }
}
