//! The `tracing` feature: one span per operation with its fields, and `retry` and
//! `node_failed` span events, seen by a subscriber that records them. Nodes on base port
//! 7755; ports 7196-7198 stay closed.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Nodes;
use redlock_client::Client;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

#[derive(Clone, Debug, Default)]
struct SpanRecord {
    name: String,
    fields: HashMap<String, String>,
    events: Vec<HashMap<String, String>>,
    closed: bool,
}

#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
    ids: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut record = SpanRecord {
            name: attrs.metadata().name().to_string(),
            ..SpanRecord::default()
        };
        attrs.record(&mut Fields(&mut record.fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(record);
        self.ids
            .lock()
            .unwrap()
            .insert(id.into_u64(), spans.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let index = self.ids.lock().unwrap()[&id.into_u64()];
        values.record(&mut Fields(&mut self.spans.lock().unwrap()[index].fields));
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let index = self.ids.lock().unwrap()[&span.id().into_u64()];
        self.spans.lock().unwrap()[index].events.push(fields);
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if let Some(index) = self.ids.lock().unwrap().remove(&id.into_u64()) {
            self.spans.lock().unwrap()[index].closed = true;
        }
    }
}

impl Recorder {
    fn take(&self) -> Vec<SpanRecord> {
        let spans = std::mem::take(&mut *self.spans.lock().unwrap());
        self.ids.lock().unwrap().clear();
        spans
    }
}

#[tokio::test(flavor = "current_thread")]
async fn spans_per_operation() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let nodes = Nodes::start(7755);

    let client = Client::builder(nodes.urls.clone())
        .attempts(2)
        .retry_delay(Duration::from_millis(30), Duration::from_millis(5))
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = client
        .lock_many(&["trace:a", "trace:b"], Duration::from_secs(10))
        .await
        .unwrap();
    assert!(lock.is_owned().await.unwrap());
    lock.extend().await.unwrap();
    lock.release().await.unwrap();
    let spans = recorder.take();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "redlock.acquire",
            "redlock.inspect",
            "redlock.extend",
            "redlock.release"
        ]
    );
    let expected = ["acquired", "inspected", "extended", "released"];
    for (span, outcome) in spans.iter().zip(expected) {
        assert!(span.closed, "{span:?}");
        assert_eq!(span.fields["resources"], "trace:a,trace:b", "{span:?}");
        assert_eq!(span.fields["outcome"], outcome, "{span:?}");
        assert_eq!(span.fields["attempts"], "1", "{span:?}");
        assert!(!span.fields.contains_key("error_class"), "{span:?}");
    }

    // Held elsewhere: a retry event inside the span, and the error class.
    for node in 0..5 {
        nodes.set(node, "trace:held", "someone-else", 10_000);
    }
    client
        .lock("trace:held", Duration::from_secs(10))
        .await
        .unwrap_err();
    let spans = recorder.take();
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    assert_eq!(span.fields["outcome"], "not_acquired");
    assert_eq!(span.fields["error_class"], "held_elsewhere");
    assert_eq!(span.fields["attempts"], "2");
    let retries: Vec<_> = span
        .events
        .iter()
        .filter(|e| e.get("event").map(String::as_str) == Some("retry"))
        .collect();
    assert_eq!(retries.len(), 1, "{span:?}");
    assert_eq!(retries[0]["reason"], "conflict");

    // Refused nodes: node_failed events with their cause.
    let mut urls = nodes.urls[..2].to_vec();
    for port in 7196..=7198 {
        urls.push(format!("redis://127.0.0.1:{port}"));
    }
    let refused = Client::builder(urls).attempts(1).build().unwrap();
    refused
        .lock("trace:refused", Duration::from_secs(10))
        .await
        .unwrap_err();
    let spans = recorder.take();
    let span = spans
        .iter()
        .find(|s| s.name == "redlock.acquire")
        .expect("acquire span");
    assert_eq!(span.fields["error_class"], "nodes_failing");
    let mut failed: Vec<(String, String)> = span
        .events
        .iter()
        .filter(|e| e.get("event").map(String::as_str) == Some("node_failed"))
        .map(|e| (e["node"].clone(), e["cause"].clone()))
        .collect();
    failed.sort();
    // Each fails in the attempt's round and again in the release after it.
    failed.dedup();
    assert_eq!(
        failed,
        vec![
            ("2".to_string(), "refused".to_string()),
            ("3".to_string(), "refused".to_string()),
            ("4".to_string(), "refused".to_string())
        ],
        "{span:?}"
    );
}
