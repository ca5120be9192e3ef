//! Reading a stream against a real server: an ordered read yields every sequence
//! once and in order while the server is killed and restarted under it; a direct
//! read (no consumer) yields the same range; an open-ended ordered stream follows
//! what is published after it opened.

mod common;

use std::time::Duration;

use common::{bounded, connect, create_stream, rows, NatsServer};
use jetstream_arrow_core::publish::{PublishOptions, Publisher};
use jetstream_arrow_core::read::{
    FollowOptions, OrderedStream, ReadMethod, ReadOptions, StreamReader,
};
use jetstream_arrow_core::Connection;

const PAYLOAD: usize = 100;

/// Publish rows `first..first + n` into `stream` (subjects `<stream>.0` to `.2`).
async fn fill(conn: &Connection, stream: &str, first: usize, n: usize) {
    let mut publisher = Publisher::new(conn.clone(), PublishOptions::default())
        .await
        .expect("a publisher");
    let (outcome, error) = publisher
        .publish(
            common::publish_schema(),
            std::iter::once(Ok(rows(stream, first, n, PAYLOAD))),
            None,
        )
        .await;
    assert_eq!((outcome.stored, error.map(|e| e.to_string())), (n, None));
}

/// Every sequence and payload `reader` yields to its end.
async fn read_to_end(reader: &mut StreamReader) -> (Vec<i64>, Vec<Vec<u8>>) {
    let (mut seqs, mut data) = (Vec::new(), Vec::new());
    while let Some(batch) = reader.next_batch().await.expect("reading the stream") {
        seqs.extend(common::int64_column(&batch, "seq"));
        data.extend(common::data_column(&batch));
    }
    (seqs, data)
}

fn payloads(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| common::payload(i, PAYLOAD)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_read_yields_every_sequence_once_in_order_across_a_server_restart() {
    let mut server = NatsServer::start();
    let conn = connect(&server.url()).await;
    let n = 600;
    bounded("filling the stream", async {
        create_stream(&conn, "R", serde_json::json!({})).await;
        fill(&conn, "R", 0, n).await;
    })
    .await;
    // 1,000 payload bytes per batch and 2,000 per pull request: ten messages a batch,
    // so the read is far from its end when the server goes.
    let options = ReadOptions {
        method: ReadMethod::Consumer,
        batch_rows: 50,
        max_bytes: 10 * PAYLOAD,
        heartbeat: Duration::from_secs(1),
        resume_timeout: Duration::from_secs(20),
        ..ReadOptions::default()
    };
    let mut reader = bounded("opening the read", async {
        StreamReader::open(conn.clone(), "R", options)
            .await
            .expect("opening a read of the stream")
    })
    .await;
    let (mut seqs, mut data) = (Vec::new(), Vec::new());
    bounded("the first batches", async {
        for _ in 0..3 {
            let batch = reader
                .next_batch()
                .await
                .expect("reading the stream")
                .expect("the range has more batches");
            seqs.extend(common::int64_column(&batch, "seq"));
            data.extend(common::data_column(&batch));
        }
    })
    .await;
    assert!(
        seqs.len() < n / 2,
        "the read is past half-way: {}",
        seqs.len()
    );

    // kill -9 and start again on the same port and store: the client reconnects,
    // the read's ephemeral consumer is gone with the server's memory of it.
    server.restart();

    // The reader forgets its resets when the range ends (its consumer is closed):
    // they are counted batch by batch.
    let mut resets = 0;
    bounded("reading after the restart", async {
        while let Some(batch) = reader.next_batch().await.expect("reading the stream") {
            resets = resets.max(reader.resets());
            seqs.extend(common::int64_column(&batch, "seq"));
            data.extend(common::data_column(&batch));
        }
    })
    .await;
    assert_eq!(seqs, (1..=n as i64).collect::<Vec<_>>());
    assert!(data == payloads(n), "every payload is read back as stored");
    assert!(
        resets >= 1,
        "the read recreated its consumer after the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_read_yields_the_range_without_a_consumer() {
    let server = NatsServer::start();
    bounded("a direct read", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "D", serde_json::json!({"allow_direct": true})).await;
        fill(&conn, "D", 0, 300).await;
        let mut reader = StreamReader::open(
            conn.clone(),
            "D",
            ReadOptions {
                method: ReadMethod::Direct,
                start_seq: Some(101),
                batch_rows: 64,
                ..ReadOptions::default()
            },
        )
        .await
        .expect("opening a direct read");
        let (seqs, data) = read_to_end(&mut reader).await;
        assert_eq!(seqs, (101..=300).collect::<Vec<_>>());
        assert!(data == payloads(300)[100..], "payloads in stream order");
        let info = common::stream_info(&conn, "D").await;
        assert_eq!(
            info.state.consumer_count, 0,
            "a direct read creates no consumer"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_stream_follows_messages_published_after_it_opened() {
    let server = NatsServer::start();
    bounded("following a stream", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "O", serde_json::json!({})).await;
        fill(&conn, "O", 0, 100).await;
        let mut follow = OrderedStream::open(
            conn.clone(),
            "O",
            FollowOptions {
                subjects: Vec::new(),
                start: jetstream_arrow_core::read::ordered::Start::All,
                include_headers: false,
                batch_rows: 1_000,
                batch_wait: Duration::from_millis(100),
                max_bytes: 1 << 20,
                heartbeat: Duration::from_secs(1),
                resume_timeout: Duration::from_secs(10),
            },
        )
        .await
        .expect("opening an ordered stream");
        let mut seqs = Vec::new();
        while seqs.len() < 100 {
            seqs.extend(common::int64_column(
                &follow.next_batch().await.expect("the next batch"),
                "seq",
            ));
        }
        fill(&conn, "O", 100, 50).await;
        while seqs.len() < 150 {
            seqs.extend(common::int64_column(
                &follow.next_batch().await.expect("the next batch"),
                "seq",
            ));
        }
        follow.close().await;
        assert_eq!(seqs, (1..=150).collect::<Vec<_>>());
    })
    .await;
}
