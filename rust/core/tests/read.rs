//! Reading a stream against a real server: an ordered read yields every sequence
//! once and in order while the server is killed and restarted under it, and so does
//! a read by either method through repeated `kill -9`s of a store that syncs every
//! write; a read whose source ends before its range does (the rest deleted, or of
//! other subjects) asks again from there and ends without an error; a direct read (no
//! consumer) yields the same range; an open-ended ordered stream follows what is
//! published after it opened.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{bounded, connect, create_stream, rows, NatsServer};
use jetstream_arrow_core::api::subjects;
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
                batch_rows: 1_000,
                batch_wait: Duration::from_millis(100),
                max_bytes: 1 << 20,
                heartbeat: Duration::from_secs(1),
                resume_timeout: Duration::from_secs(10),
                ..FollowOptions::default()
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

/// Reads by `method` through `kills` `kill -9`s of a server that syncs every write,
/// spread over the range; returns what was read and the read's resets.
async fn read_through_kills(method: ReadMethod, kills: usize) -> (Vec<i64>, Vec<Vec<u8>>, u32) {
    let mut server = NatsServer::start_syncing_every_write();
    let conn = connect(&server.url()).await;
    let n = 1_200;
    bounded("filling the stream", async {
        create_stream(&conn, "K", serde_json::json!({"allow_direct": true})).await;
        fill(&conn, "K", 0, n).await;
    })
    .await;
    // Ten messages a batch: 120 batches, a kill every 120 / (kills + 1) of them.
    let options = ReadOptions {
        method,
        batch_rows: 50,
        max_bytes: 10 * PAYLOAD,
        heartbeat: Duration::from_secs(1),
        resume_timeout: Duration::from_secs(20),
        ..ReadOptions::default()
    };
    let mut reader = bounded("opening the read", async {
        StreamReader::open(conn.clone(), "K", options)
            .await
            .expect("opening a read of the stream")
    })
    .await;
    let (mut seqs, mut data, mut resets) = (Vec::new(), Vec::new(), 0);
    let mut batches = 0;
    bounded("reading through the kills", async {
        while let Some(batch) = reader.next_batch().await.expect("reading the stream") {
            batches += 1;
            resets = reader.resets();
            seqs.extend(common::int64_column(&batch, "seq"));
            data.extend(common::data_column(&batch));
            if batches % (n / 10 / (kills + 1)) == 0 && batches < n / 10 {
                server.restart();
            }
        }
    })
    .await;
    (seqs, data, resets.max(reader.resets()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_read_yields_every_message_once_in_order_through_kill_9s() {
    let (seqs, data, resets) = read_through_kills(ReadMethod::Consumer, 3).await;
    assert_eq!(seqs, (1..=1_200).collect::<Vec<_>>());
    assert!(
        data == payloads(1_200),
        "every payload is read back as stored"
    );
    assert!(
        resets >= 3,
        "a new consumer after each kill: {resets} resets"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_read_yields_every_message_once_in_order_through_kill_9s() {
    let (seqs, data, _) = read_through_kills(ReadMethod::Direct, 3).await;
    assert_eq!(seqs, (1..=1_200).collect::<Vec<_>>());
    assert!(
        data == payloads(1_200),
        "every payload is read back as stored"
    );
}

/// The consumers a read created are deleted when it ends (in the background for one
/// it replaced: wait for that).
async fn no_consumer_left(conn: &Connection, stream: &str) {
    common::wait_until(
        Duration::from_secs(5),
        "the read's consumers to go",
        || async { common::stream_info(conn, stream).await.state.consumer_count == 0 },
    )
    .await;
}

/// Delete message `seq` of `stream`.
async fn delete_message(conn: &Connection, stream: &str, seq: u64) {
    let body = Bytes::from(serde_json::json!({"seq": seq, "no_erase": true}).to_string());
    conn.api_request(
        &subjects::subject(subjects::STREAM_MSG_DELETE, &[stream]),
        body,
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("deleting message {seq} of {stream}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_whose_rest_was_deleted_while_it_read_ends_where_the_stream_does() {
    let server = NatsServer::start();
    bounded("a read whose tail goes", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "T", serde_json::json!({})).await;
        fill(&conn, "T", 0, 200).await;
        let mut reader = StreamReader::open(
            conn.clone(),
            "T",
            ReadOptions {
                method: ReadMethod::Consumer,
                batch_rows: 10,
                max_bytes: 10 * PAYLOAD,
                ..ReadOptions::default()
            },
        )
        .await
        .expect("opening a read");
        let first = reader
            .next_batch()
            .await
            .expect("the first batch")
            .expect("a batch");
        let mut seqs = common::int64_column(&first, "seq");
        // The range owes 1..=200; its last ten go before the read gets there. The
        // consumer then says nothing is pending after 190, a new one at 191 agrees,
        // and fewer messages than the range is no error: the stream lost them.
        for seq in 191..=200 {
            delete_message(&conn, "T", seq).await;
        }
        let (rest, _) = read_to_end(&mut reader).await;
        seqs.extend(rest);
        assert_eq!(seqs, (1..=190).collect::<Vec<_>>());
        assert_eq!(reader.resets(), 0, "no failure to recover from");
        no_consumer_left(&conn, "T").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_read_ends_after_its_last_subject_without_an_error() {
    let server = NatsServer::start();
    bounded("a filtered read", async {
        let conn = connect(&server.url()).await;
        create_stream(&conn, "F", serde_json::json!({})).await;
        // Rows 0..300 on F.0, F.1, F.2 in turn; row 299 (sequence 300) is on F.2, so
        // the last message of F.0 is sequence 298 and the consumer ends there.
        fill(&conn, "F", 0, 300).await;
        let mut reader = StreamReader::open(
            conn.clone(),
            "F",
            ReadOptions {
                method: ReadMethod::Consumer,
                subjects: vec!["F.0".into()],
                batch_rows: 25,
                ..ReadOptions::default()
            },
        )
        .await
        .expect("opening a filtered read");
        let (seqs, _) = read_to_end(&mut reader).await;
        assert_eq!(seqs, (1..=298).step_by(3).collect::<Vec<_>>());
        no_consumer_left(&conn, "F").await;
    })
    .await;
}
