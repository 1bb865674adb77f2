//! The queue page's section on the settings stored in Redis for the queue (its limits, which
//! override every server's configuration, and the aging time of its priority levels), with the
//! form that changes them (posted to `actions::settings`).

use chronos_admin::SettingsRow;
use maud::{html, Markup};

use super::csrf;
use crate::href::queue_href;
use crate::state::AppState;

/// One field of the form: its form name, label, the stored value, an example and what it means.
struct Field<'a> {
    name: &'static str,
    label: &'static str,
    value: &'a Option<String>,
    example: &'static str,
    help: &'static str,
}

fn fields(row: &SettingsRow) -> [Field<'_>; 6] {
    [
        Field {
            name: "rate",
            label: "rate",
            value: &row.rate,
            example: "100/1s",
            help: "task starts per period across the cluster",
        },
        Field {
            name: "burst",
            label: "burst",
            value: &row.burst,
            example: "5",
            help: "starts of the rate granted at once",
        },
        Field {
            name: "concurrency",
            label: "concurrency",
            value: &row.concurrency,
            example: "10",
            help: "tasks held at once across the cluster",
        },
        Field {
            name: "per_key_rate",
            label: "per-key rate",
            value: &row.per_key_rate,
            example: "5/1s",
            help: "starts per period for each rate key",
        },
        Field {
            name: "aging",
            label: "aging",
            value: &row.aging,
            example: "60s",
            help: "how long a waiting task of a less urgent priority level may wait before it is served ahead of newer, more urgent work",
        },
        Field {
            name: "retry_level",
            label: "retry level",
            value: &row.retry_level,
            example: "1",
            help: "retried tasks go to this priority level (0 first) when it is more urgent than their own",
        },
    ]
}

/// The section: what is stored, and (unless the console is read-only) the form to change it.
pub(crate) fn section(st: &AppState, row: &SettingsRow, back: &str) -> Markup {
    html! {
        section #limits {
            h2 { "Limits stored in Redis" }
            p.muted {
                "They override each server's configured limits, field by field; running servers apply a change within about 2 s. "
                "A blank field stores nothing (each server's configuration applies); "
                code { "none" } " lifts a configured rate or concurrency limit."
            }
            @if st.config.read_only {
                table.grid #limits-table {
                    tbody {
                        @for f in fields(row) {
                            tr {
                                th { (f.label) }
                                td.mono data-setting=(f.name) { (f.value.as_deref().unwrap_or("-")) }
                                td.muted { (f.help) }
                            }
                        }
                    }
                }
            } @else {
                form #limits-form method="post" action={(queue_href(&row.queue)) "/settings"} {
                    (csrf(st))
                    input type="hidden" name="back" value=(back);
                    table.grid {
                        tbody {
                            @for f in fields(row) {
                                tr {
                                    th { label for={"limit-" (f.name)} { (f.label) } }
                                    td {
                                        input type="text" id={"limit-" (f.name)} name=(f.name)
                                            value=(f.value.clone().unwrap_or_default())
                                            placeholder="server config";
                                    }
                                    td.muted { (f.help) ", e.g. " code { (f.example) } }
                                }
                            }
                        }
                    }
                    button.small type="submit" #limits-save { "save limits" }
                }
            }
        }
    }
}
