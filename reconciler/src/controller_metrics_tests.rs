use super::*;
use keyward_process::health::encode;

fn registry() -> (ControllerFamilies, Registry) {
    let families = ControllerFamilies::default();
    let mut registry = Registry::default();
    families.register(&mut registry);
    (families, registry)
}

/// The value of the sample `series` (name and labels, as written) in `text`.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

const ES: &str = "{controller=\"externalsecret\"}";
const QUEUE: &str = "{name=\"externalsecret\",controller=\"externalsecret\"}";

fn result(text: &str, result: &str) -> f64 {
    value(text, &format!("controller_runtime_reconcile_total{{controller=\"externalsecret\",result=\"{result}\"}}"))
}

#[test]
fn the_delay_of_an_action_is_read() {
    for d in [
        Duration::from_secs(3600),
        Duration::from_millis(1500),
        Duration::from_millis(250),
        Duration::from_micros(7),
        Duration::from_nanos(3),
        Duration::ZERO,
    ] {
        let read = requeue_after(&Action::requeue(d)).expect("a delay");
        assert!(read.abs_diff(d) < Duration::from_nanos(2), "{d:?} read as {read:?}");
    }
    assert_eq!(requeue_after(&Action::await_change()), None);
}

#[tokio::test]
async fn results_follow_how_a_reconcile_ended() {
    let (families, registry) = registry();
    let c = families.controller("externalsecret", 4);
    let ok = |a: Action| async move { Ok::<_, String>(a) };
    c.observe(Some("n"), "a", ok(Action::await_change())).await.unwrap();
    c.observe(Some("n"), "a", ok(Action::requeue(Duration::from_secs(60)))).await.unwrap();
    c.observe(Some("n"), "a", async { Err::<Action, _>("api down".to_string()) }).await.unwrap_err();
    // A sync that failed, reported on the object and retried with its backoff.
    let reported = async {
        failed();
        Ok::<_, String>(Action::requeue(Duration::from_secs(5)))
    };
    assert_eq!(c.observe(Some("n"), "a", reported).await, Ok(Action::requeue(Duration::from_secs(5))));
    failed(); // outside a reconcile: nothing to mark
    let text = encode(&registry).unwrap();
    assert_eq!(result(&text, "success"), 1.0);
    assert_eq!(result(&text, "requeue_after"), 1.0);
    assert_eq!(result(&text, "error"), 2.0);
    assert_eq!(value(&text, &format!("controller_runtime_reconcile_errors_total{ES}")), 2.0);
    assert_eq!(value(&text, &format!("controller_runtime_reconcile_time_seconds_count{ES}")), 4.0);
    assert_eq!(value(&text, &format!("controller_runtime_max_concurrent_reconciles{ES}")), 4.0);
    assert_eq!(value(&text, &format!("controller_runtime_active_workers{ES}")), 0.0);
    // Two requeues with a delay and one returned error.
    assert_eq!(value(&text, &format!("workqueue_retries_total{QUEUE}")), 3.0);
    assert_eq!(value(&text, &format!("workqueue_work_duration_seconds_count{QUEUE}")), 4.0);
    assert!(
        text.contains("controller_runtime_reconcile_time_seconds_bucket{controller=\"externalsecret\",le=\"0.005\"}")
    );
}

#[tokio::test]
async fn a_busy_worker_is_counted_while_it_runs() {
    let (families, registry) = registry();
    let c = families.controller("externalsecret", 1);
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let c = c.clone();
        async move {
            c.observe(Some("n"), "a", async {
                let _ = wait.await;
                Ok::<_, String>(Action::await_change())
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let text = encode(&registry).unwrap();
    assert_eq!(value(&text, &format!("controller_runtime_active_workers{ES}")), 1.0);
    assert!(value(&text, &format!("workqueue_longest_running_processor_seconds{QUEUE}")) > 0.0);
    assert!(value(&text, &format!("workqueue_unfinished_work_seconds{QUEUE}")) > 0.0);
    let _ = go.send(());
    running.await.unwrap().unwrap();
    let text = encode(&registry).unwrap();
    assert_eq!(value(&text, &format!("controller_runtime_active_workers{ES}")), 0.0);
    assert_eq!(value(&text, &format!("workqueue_longest_running_processor_seconds{QUEUE}")), 0.0);

    // A reconcile dropped mid-way (a shutdown past its grace period) leaves no busy worker.
    let stuck =
        tokio::spawn(async move { c.observe(Some("n"), "b", std::future::pending::<Result<Action, String>>()).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(value(&encode(&registry).unwrap(), &format!("controller_runtime_active_workers{ES}")), 1.0);
    stuck.abort();
    let _ = stuck.await;
    let text = encode(&registry).unwrap();
    assert_eq!(value(&text, &format!("controller_runtime_active_workers{ES}")), 0.0);
    assert_eq!(value(&text, &format!("workqueue_unfinished_work_seconds{QUEUE}")), 0.0);
}

#[tokio::test]
async fn the_queue_holds_what_is_due_and_not_started() {
    let (families, registry) = registry();
    let c = families.controller("externalsecret", 4);
    let depth = || value(&encode(&registry).unwrap(), &format!("workqueue_depth{QUEUE}"));
    let adds = || value(&encode(&registry).unwrap(), &format!("workqueue_adds_total{QUEUE}"));

    // Two triggers of one object are one item; another object is a second.
    let triggers = futures::stream::iter([
        ObjectRef::<k8s_openapi::api::core::v1::Secret>::new("a").within("n"),
        ObjectRef::new("a").within("n"),
        ObjectRef::new("b").within("n"),
    ]);
    let seen: Vec<_> = c.queued(triggers).collect().await;
    assert_eq!(seen.len(), 3, "triggers pass through");
    assert_eq!((depth(), adds()), (2.0, 2.0));

    tokio::time::sleep(Duration::from_millis(20)).await;
    c.observe(Some("n"), "a", async { Ok::<_, String>(Action::requeue(Duration::from_secs(3600))) }).await.unwrap();
    let text = encode(&registry).unwrap();
    assert_eq!(value(&text, &format!("workqueue_depth{QUEUE}")), 1.0, "a started, due again in an hour");
    assert!(value(&text, &format!("workqueue_queue_duration_seconds_sum{QUEUE}")) >= 0.02, "{text}");

    // Due at once: in the queue (and added) when it falls due, not before it started again.
    c.observe(Some("n"), "b", async { Ok::<_, String>(Action::requeue(Duration::ZERO)) }).await.unwrap();
    assert_eq!((depth(), adds()), (1.0, 3.0));
    c.observe(Some("n"), "b", async { Ok::<_, String>(Action::await_change()) }).await.unwrap();
    assert_eq!((depth(), adds()), (0.0, 3.0), "each fall due is one add");

    // An error policy's retry is followed; a deleted object is forgotten.
    c.requeued(Some("n"), "c", &Action::requeue(Duration::ZERO));
    assert_eq!(depth(), 1.0);
    families.forget("externalsecret", "n", "c");
    families.forget("externalsecret", "n", "a");
    assert_eq!(depth(), 0.0);

    // A controller on its own watch: reconciles counted, no queue kept.
    let w = families.watching_controller("generatorstate", 2);
    w.observe(Some("n"), "s", async { Ok::<_, String>(Action::requeue(Duration::ZERO)) }).await.unwrap();
    let text = encode(&registry).unwrap();
    assert_eq!(value(&text, "workqueue_depth{name=\"generatorstate\",controller=\"generatorstate\"}"), 0.0);
    assert_eq!(value(&text, "workqueue_adds_total{name=\"generatorstate\",controller=\"generatorstate\"}"), 1.0);
}
