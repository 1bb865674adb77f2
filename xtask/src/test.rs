use anyhow::Result;

/// The whole suite: unit, integration, end-to-end and doc tests of every crate. Tests start their
/// own throwaway Redis unless `CHRONOS_REDIS_URL` is set.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let mut args = vec!["test", "--workspace"];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
