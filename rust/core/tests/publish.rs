//! Publishing against a real server: the ack window stores every row once and in
//! order, msg ids make a re-run all duplicates, `503 No Responders` and lost acks are
//! retried with the same message, fast ingest stores a stream's worth of rows, and
//! atomic batches are stored whole (a re-run found stored by its msg ids).
//!
//! One module because every test shares its publisher and outcome helpers, and the
//! tier runs each file as one test binary: one per publishing mode would build three.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use common::{bounded, connect, create_stream, rows, stream_info, NatsServer};
use jetstream_arrow_core::publish::{PublishMode, PublishOptions, PublishOutcome, Publisher};
use jetstream_arrow_core::read::{ReadMethod, ReadOptions, StreamReader};
use jetstream_arrow_core::{Connection, ErrorKind, Result};

/// Publish `batches` (in the message schema) through `publisher`; panics on a call
/// that ended early with an error.
async fn publish_all(publisher: &mut Publisher, batches: Vec<RecordBatch>) -> PublishOutcome {
    let (outcome, error) = publisher
        .publish(common::publish_schema(), batches.into_iter().map(Ok), None)
        .await;
    if let Some(e) = error {
        panic!("the publish ended early: {e}");
    }
    outcome
}

async fn publisher(conn: &Connection, options: PublishOptions) -> Publisher {
    Publisher::new(conn.clone(), options)
        .await
        .expect("a publisher with valid options")
}

/// The first `limit` errors of `outcome`, to show why rows failed.
fn errors(outcome: &PublishOutcome, limit: usize) -> Vec<String> {
    (0..outcome.rows())
        .filter_map(|row| outcome.error(row).map(|e| format!("row {row}: {e}")))
        .take(limit)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_stores_every_row_once_in_order_and_a_rerun_is_all_duplicates() {
    let server = NatsServer::start();
    bounded("publishing through a small window twice", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "W", serde_json::json!({})).await;
        // A window of 16 fills and drains many times over 1,000 rows in three batches.
        let mut publisher = publisher(
            &conn,
            PublishOptions {
                window: 16,
                ..PublishOptions::default()
            },
        )
        .await;
        let input = || {
            vec![
                rows("W", 0, 400, 64),
                rows("W", 400, 400, 64),
                rows("W", 800, 200, 64),
            ]
        };

        let first = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (first.rows(), first.stored, first.duplicates, first.failed()),
            (1_000, 1_000, 0, 0),
            "{:?}",
            errors(&first, 3)
        );
        let seqs: Vec<Option<u64>> = (0..1_000).map(|row| first.seq(row)).collect();
        let in_order: Vec<Option<u64>> = (1..=1_000).map(Some).collect();
        assert_eq!(seqs, in_order, "rows are stored in input order");

        let again = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (again.rows(), again.stored, again.duplicates, again.failed()),
            (1_000, 0, 1_000, 0),
            "{:?}",
            errors(&again, 3)
        );
        // A duplicate's ack names the sequence the row was first stored at.
        let seqs: Vec<Option<u64>> = (0..1_000).map(|row| again.seq(row)).collect();
        assert_eq!(seqs, in_order);
        assert_eq!(stream_info(&conn, "W").await.state.messages, 1_000);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_answered_no_responders_are_sent_again_until_their_stream_exists() {
    let server = NatsServer::start();
    bounded("publishing before the stream exists", async {
        let conn = connect(&server.url()).await;
        let mut publisher = publisher(
            &conn,
            PublishOptions {
                max_retries: 10,
                retry_backoff: Duration::from_millis(50),
                ..PublishOptions::default()
            },
        )
        .await;
        // Until the stream is created, every message is answered `503 No Responders`
        // and waits for its retry; backoffs of 50 ms doubling to 2 s outlast 300 ms.
        let creator = {
            let conn = conn.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                create_stream(&conn, "LATE", serde_json::json!({})).await;
            })
        };
        let started = tokio::time::Instant::now();
        let outcome = publish_all(&mut publisher, vec![rows("LATE", 0, 50, 16)]).await;
        creator.await.expect("the stream was created");
        assert_eq!(
            (outcome.stored, outcome.duplicates, outcome.failed()),
            (50, 0, 0),
            "{:?}",
            errors(&outcome, 3)
        );
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "the rows were stored before their stream existed"
        );
        assert_eq!(stream_info(&conn, "LATE").await.state.messages, 50);
    })
    .await;
}

/// Input whose second batch is asked for only after every row of the first was sent:
/// at that moment the server is killed (acks of up to a window of rows are lost), and
/// a thread restarts it half a second later.
struct KillBetweenBatches {
    batches: std::vec::IntoIter<RecordBatch>,
    server: Arc<Mutex<NatsServer>>,
    taken: usize,
    restarter: Option<std::thread::JoinHandle<()>>,
}

impl Iterator for KillBetweenBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.taken == 1 {
            let server = self.server.clone();
            server.lock().unwrap_or_else(|e| e.into_inner()).kill();
            self.restarter = Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(500));
                server.lock().unwrap_or_else(|e| e.into_inner()).restart();
            }));
        }
        self.taken += 1;
        self.batches.next().map(Ok)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_in_flight_when_the_server_is_killed_end_stored_once_after_a_rerun() {
    let server = Arc::new(Mutex::new(NatsServer::start()));
    let url = server.lock().unwrap().url();
    let conn = connect(&url).await;
    bounded("publishing across a kill -9 of the server", async {
        create_stream(&conn, "K", serde_json::json!({})).await;
        let options = PublishOptions {
            window: 256,
            ack_timeout: Duration::from_secs(1),
            max_retries: 5,
            ..PublishOptions::default()
        };
        let mut publisher = publisher(&conn, options).await;
        let n = 4_000;
        let input = || vec![rows("K", 0, n / 2, 32), rows("K", n / 2, n / 2, 32)];
        let mut killing = KillBetweenBatches {
            batches: input().into_iter(),
            server: server.clone(),
            taken: 0,
            restarter: None,
        };
        let (first, error) = publisher
            .publish(common::publish_schema(), &mut killing, None)
            .await;
        killing
            .restarter
            .take()
            .expect("the server was killed between the batches")
            .join()
            .expect("the server restarted");
        eprintln!(
            "across the kill: {} rows read, {} stored, {} duplicates, {} failed ({:?}); \
             error: {error:?}",
            first.rows(),
            first.stored,
            first.duplicates,
            first.failed(),
            errors(&first, 1)
        );
        // Every row read has its outcome; an error (the connection lost for longer than
        // the ack timeout) stops the input, and then says which rows were not sent.
        assert_eq!(
            first.stored + first.duplicates + first.failed(),
            first.rows(),
            "{error:?}"
        );
        assert!(first.stored > 0, "{error:?}: {:?}", errors(&first, 3));
        if error.is_some() {
            assert!(
                first.failed() > 0,
                "an error without a failed row: {error:?}"
            );
        }

        // The same input again, with the same msg ids: what was stored is a duplicate,
        // the rest is stored now, and nothing is stored twice.
        let again = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (again.rows(), again.failed()),
            (n, 0),
            "{:?}",
            errors(&again, 3)
        );
        assert!(
            again.duplicates >= first.stored,
            "the first run's rows were stored twice"
        );
        let state = stream_info(&conn, "K").await.state;
        assert_eq!(
            (state.messages, state.last_sequence),
            (n as u64, n as u64),
            "every row is stored exactly once"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_publish_stores_every_row_once_in_order() {
    let server = NatsServer::start();
    bounded("a fast-ingest publish", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "F", serde_json::json!({"allow_batched": true})).await;
        let mut publisher = publisher(
            &conn,
            PublishOptions {
                mode: PublishMode::Fast,
                ..PublishOptions::default()
            },
        )
        .await;
        let n = 5_000;
        let input = || vec![rows("F", 0, 3_000, 48), rows("F", 3_000, 2_000, 48)];
        let first = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (first.rows(), first.stored, first.failed()),
            (n, n, 0),
            "{:?}",
            errors(&first, 3)
        );
        let state = stream_info(&conn, "F").await.state;
        assert_eq!(
            (state.messages, state.first_sequence, state.last_sequence),
            (n as u64, 1, n as u64)
        );

        // Read back: row i is stream sequence i + 1 with its own payload.
        let mut reader = StreamReader::open(
            conn.clone(),
            "F",
            ReadOptions {
                method: ReadMethod::Consumer,
                ..ReadOptions::default()
            },
        )
        .await
        .expect("opening a read of the stream");
        let (mut seqs, mut data) = (Vec::new(), Vec::new());
        while let Some(batch) = reader.next_batch().await.expect("reading the stream") {
            seqs.extend(common::int64_column(&batch, "seq"));
            data.extend(common::data_column(&batch));
        }
        assert_eq!(seqs, (1..=n as i64).collect::<Vec<_>>());
        assert!(
            data.iter()
                .enumerate()
                .all(|(i, d)| *d == common::payload(i, 48)),
            "payloads are stored in row order"
        );

        // Fast acks cover ranges and do not tell duplicates apart; the server drops
        // the re-run's rows by their msg ids all the same.
        let again = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (again.rows(), again.failed()),
            (n, 0),
            "{:?}",
            errors(&again, 3)
        );
        assert_eq!(stream_info(&conn, "F").await.state.messages, n as u64);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_publish_into_a_stream_without_allow_batched_fails_naming_the_mode() {
    let server = NatsServer::start();
    bounded("a fast publish refused by its stream", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "NOFAST", serde_json::json!({})).await;
        let mut publisher = publisher(
            &conn,
            PublishOptions {
                mode: PublishMode::Fast,
                ..PublishOptions::default()
            },
        )
        .await;
        let (outcome, error) = publisher
            .publish(
                common::publish_schema(),
                std::iter::once(Ok(rows("NOFAST", 0, 20, 8))),
                None,
            )
            .await;
        assert_eq!((outcome.stored, outcome.failed()), (0, 20), "{error:?}");
        let first = outcome.error(0).expect("the first row failed");
        assert!(
            first.contains("10205") && first.contains("mode='acked'"),
            "{first}"
        );
        if let Some(e) = error {
            assert_ne!(e.kind(), ErrorKind::Connection, "{e}");
        }
        assert_eq!(stream_info(&conn, "NOFAST").await.state.messages, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_publish_stores_whole_batches_and_a_rerun_is_all_duplicates() {
    let server = NatsServer::start();
    bounded("an atomic publish and its re-run", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "AT", serde_json::json!({"allow_atomic": true})).await;
        let mut publisher = publisher(
            &conn,
            PublishOptions {
                mode: PublishMode::Atomic,
                batch_rows: 400,
                ..PublishOptions::default()
            },
        )
        .await;
        let n = 1_000;
        let input = || vec![rows("AT", 0, 700, 32), rows("AT", 700, 300, 32)];
        let first = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (first.rows(), first.stored, first.failed()),
            (n, n, 0),
            "{:?}",
            errors(&first, 3)
        );
        let seqs: Vec<Option<u64>> = (0..n).map(|row| first.seq(row)).collect();
        assert_eq!(seqs, (1..=n as u64).map(Some).collect::<Vec<_>>());

        // Every batch is refused for holding stored msg ids; each row is then found
        // stored by a probe and reported a duplicate at its first sequence.
        let again = publish_all(&mut publisher, input()).await;
        assert_eq!(
            (again.stored, again.duplicates, again.failed()),
            (0, n, 0),
            "{:?}",
            errors(&again, 3)
        );
        assert_eq!((0..n).map(|row| again.seq(row)).collect::<Vec<_>>(), seqs);
        assert_eq!(stream_info(&conn, "AT").await.state.messages, n as u64);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_publish_into_a_stream_without_allow_atomic_stores_nothing() {
    let server = NatsServer::start();
    bounded("an atomic publish refused by its stream", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "NOATOM", serde_json::json!({})).await;
        let mut publisher = publisher(
            &conn,
            PublishOptions {
                mode: PublishMode::Atomic,
                batch_rows: 8,
                ..PublishOptions::default()
            },
        )
        .await;
        let outcome = publish_all(&mut publisher, vec![rows("NOATOM", 0, 20, 8)]).await;
        assert_eq!((outcome.stored, outcome.failed()), (0, 20));
        let first = outcome.error(0).expect("the first row failed");
        assert!(
            first.contains("10174") && first.contains("allow_atomic"),
            "{first}"
        );
        assert!(outcome
            .error(8)
            .is_some_and(|e| e.starts_with("not sent: ")));
        assert_eq!(stream_info(&conn, "NOATOM").await.state.messages, 0);
    })
    .await;
}
