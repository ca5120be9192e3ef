//! Consuming against a real server: a durable pull consumer fetched, nak'ed and
//! consumed continuously; a push consumer; a work queue drained through flow-control
//! acking; and a pull over the consumer's `max_batch` refused with an error naming it.

mod common;

use std::time::Duration;

use common::{bounded, connect, consumer_info, create_consumer, create_stream, rows, NatsServer};
use jetstream_arrow_core::api::types::{AckPolicy as WireAckPolicy, ConsumerConfig};
use jetstream_arrow_core::consume::durable::{AckKind, AckPolicy, ConsumeOptions, DurableConsumer};
use jetstream_arrow_core::consume::pull::FetchRequest;
use jetstream_arrow_core::consume::push::{PushConsumer, PushOptions};
use jetstream_arrow_core::publish::{PublishOptions, Publisher};
use jetstream_arrow_core::{Connection, ErrorKind};

/// Publish `n` rows into `stream`.
async fn fill(conn: &Connection, stream: &str, n: usize) {
    let mut publisher = Publisher::new(conn.clone(), PublishOptions::default())
        .await
        .expect("a publisher");
    let (outcome, error) = publisher
        .publish(
            common::publish_schema(),
            std::iter::once(Ok(rows(stream, 0, n, 16))),
            None,
        )
        .await;
    assert_eq!((outcome.stored, error.map(|e| e.to_string())), (n, None));
}

fn fetch(max_messages: usize) -> FetchRequest {
    FetchRequest {
        max_messages,
        max_bytes: None,
        expires: Duration::from_secs(2),
        no_wait: false,
        heartbeat: None,
        priority: None,
        pin: Default::default(),
    }
}

fn durable(name: &str) -> ConsumerConfig {
    ConsumerConfig {
        durable_name: Some(name.to_string()),
        ack_policy: WireAckPolicy::Explicit,
        ..ConsumerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_pull_consumer_delivers_every_message_and_takes_its_acks() {
    let server = NatsServer::start();
    bounded("pull consumption", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "P", serde_json::json!({})).await;
        fill(&conn, "P", 300).await;
        create_consumer(&conn, "P", durable("pull")).await;
        let consumer = DurableConsumer::bind(conn.clone(), "P", "pull", Some(AckPolicy::Explicit))
            .expect("binding the consumer");

        let first = consumer
            .fetch(&fetch(100), false, None)
            .await
            .expect("a fetch");
        assert_eq!(
            common::int64_column(&first.batch, "seq"),
            (1..=100).collect::<Vec<_>>()
        );
        assert_eq!(
            common::int64_column(&first.batch, "delivered"),
            vec![1; 100]
        );
        first.acknowledge(None, AckKind::Ack).await.expect("acking");

        // A nak sends the batch again, each message delivered a second time. The
        // server takes acks and pull requests on separate queues, so redeliveries may
        // come before, among or after the rest: no order is asserted across them.
        let second = consumer
            .fetch(&fetch(100), false, None)
            .await
            .expect("a fetch");
        assert_eq!(
            common::int64_column(&second.batch, "seq"),
            (101..=200).collect::<Vec<_>>()
        );
        second
            .acknowledge(None, AckKind::Nak { delay: None })
            .await
            .expect("naking");

        // The rest continuously, through the pull loop.
        let mut messages = consumer
            .messages(ConsumeOptions {
                max_messages: 64,
                expires: Duration::from_secs(5),
                heartbeat: Duration::from_secs(1),
                batch_rows: 40,
                batch_wait: Duration::from_millis(100),
                ..ConsumeOptions::default()
            })
            .await
            .expect("continuous consumption");
        let mut rest: Vec<(i64, i64)> = Vec::new();
        while rest.len() < 200 {
            let batch = messages.next_batch().await.expect("the next batch");
            let seqs = common::int64_column(&batch.batch, "seq");
            let delivered = common::int64_column(&batch.batch, "delivered");
            rest.extend(seqs.into_iter().zip(delivered));
            // A double ack: sent as requests, each confirmed by the server.
            batch
                .ack_sync(None, Duration::from_secs(5))
                .await
                .expect("acks confirmed by the server");
        }
        rest.sort_unstable();
        let expected: Vec<(i64, i64)> = (101..=300)
            .map(|seq| (seq, if seq <= 200 { 2 } else { 1 }))
            .collect();
        assert_eq!(
            rest, expected,
            "(seq, delivered) of every message after the nak"
        );

        common::wait_until(
            Duration::from_secs(10),
            "the ack floor to reach 300",
            || async {
                let info = consumer_info(&conn, "P", "pull").await;
                info.ack_floor.stream_sequence == 300 && info.num_ack_pending == 0
            },
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_over_the_consumers_max_batch_fails_naming_max_batch() {
    let server = NatsServer::start();
    bounded("a pull over max_batch", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "MB", serde_json::json!({})).await;
        fill(&conn, "MB", 20).await;
        create_consumer(
            &conn,
            "MB",
            ConsumerConfig {
                max_batch: 10,
                ..durable("small")
            },
        )
        .await;
        let consumer = DurableConsumer::bind(conn.clone(), "MB", "small", None).expect("binding");
        let error = match consumer.fetch(&fetch(50), false, None).await {
            Ok(batch) => panic!(
                "a pull of 50 from a consumer with max_batch 10 delivered {} rows",
                batch.len()
            ),
            Err(e) => e,
        };
        assert_eq!(error.kind(), ErrorKind::Api, "{error}");
        let message = error.to_string();
        assert!(
            message.contains("max_batch") && message.contains("'max_messages'"),
            "the error names the consumer's limit and the option to lower: {message}"
        );
        // The same consumer answers a pull within its limit.
        let batch = consumer
            .fetch(&fetch(10), false, None)
            .await
            .expect("a pull of 10");
        assert_eq!(batch.len(), 10);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_consumer_delivers_every_message_once_in_order() {
    let server = NatsServer::start();
    bounded("push consumption", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "PU", serde_json::json!({})).await;
        fill(&conn, "PU", 500).await;
        create_consumer(
            &conn,
            "PU",
            ConsumerConfig {
                deliver_subject: Some("deliver.PU".to_string()),
                idle_heartbeat: Duration::from_secs(1),
                flow_control: true,
                ..durable("push")
            },
        )
        .await;
        // Bound without a deliver subject: the consumer's info supplies it.
        let consumer = PushConsumer::bind(conn.clone(), "PU", "push", None, None)
            .await
            .expect("binding the push consumer");
        assert_eq!(consumer.deliver_subject, "deliver.PU");
        let mut messages = consumer
            .messages(PushOptions {
                batch_rows: 200,
                batch_wait: Duration::from_millis(200),
                include_headers: false,
                heartbeat: None,
                values: None,
            })
            .await
            .expect("push consumption");
        let mut seqs = Vec::new();
        while seqs.len() < 500 {
            let batch = messages.next_batch().await.expect("the next batch");
            assert!(
                common::int64_column(&batch.batch, "delivered")
                    .iter()
                    .all(|&d| d == 1),
                "nothing is delivered twice"
            );
            seqs.extend(common::int64_column(&batch.batch, "seq"));
            batch.acknowledge(None, AckKind::Ack).await.expect("acking");
        }
        assert_eq!(seqs, (1..=500).collect::<Vec<_>>());
        common::wait_until(
            Duration::from_secs(10),
            "every message acknowledged",
            || async {
                let info = consumer_info(&conn, "PU", "push").await;
                info.ack_floor.stream_sequence == 500 && info.num_ack_pending == 0
            },
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_queue_drains_through_flow_control_acks() {
    let server = NatsServer::start();
    bounded("flow-control consumption", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "WQ", serde_json::json!({"retention": "workqueue"})).await;
        let n = 2_000;
        fill(&conn, "WQ", n).await;
        // The server's rules for flow-control acking: a push consumer with flow
        // control, a 1 s heartbeat and a bounded window (here a tenth of the queue, so
        // it takes many answers to drain).
        create_consumer(
            &conn,
            "WQ",
            ConsumerConfig {
                durable_name: Some("fc".to_string()),
                deliver_subject: Some("deliver.WQ".to_string()),
                ack_policy: WireAckPolicy::FlowControl,
                flow_control: true,
                idle_heartbeat: Duration::from_secs(1),
                max_ack_pending: 200,
                ..ConsumerConfig::default()
            },
        )
        .await;
        let consumer = PushConsumer::bind(conn.clone(), "WQ", "fc", None, None)
            .await
            .expect("binding the flow-control consumer");
        let mut messages = consumer
            .messages(PushOptions {
                batch_rows: 100,
                batch_wait: Duration::from_millis(100),
                include_headers: false,
                heartbeat: None,
                values: None,
            })
            .await
            .expect("push consumption");
        let mut seqs = Vec::new();
        while seqs.len() < n {
            let batch = messages.next_batch().await.expect("the next batch");
            seqs.extend(common::int64_column(&batch.batch, "seq"));
            // Releases the batch: the next flow-control answer acknowledges it.
            batch
                .acknowledge(None, AckKind::Ack)
                .await
                .expect("releasing");
        }
        assert_eq!(seqs, (1..=n as i64).collect::<Vec<_>>());
        // The last window is acknowledged by the server's next request or stall.
        common::wait_until(
            Duration::from_secs(20),
            "the work queue to empty",
            || async { common::stream_info(&conn, "WQ").await.state.messages == 0 },
        )
        .await;
        let answers = messages.flow_control_answers();
        eprintln!("{n} messages acknowledged with {answers} flow-control answers");
        assert!(
            (1..=n as u64 / 20).contains(&answers),
            "{n} messages acknowledged with {answers} flow-control answers"
        );
    })
    .await;
}
