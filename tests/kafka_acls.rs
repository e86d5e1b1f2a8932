//! `kafka.acls`, live against Apache Kafka's KRaft `StandardAuthorizer` (issue 33): the stack's
//! SASL/SCRAM listener (`DLQCTL_KAFKA_SASL_BOOTSTRAP`) judges every request by the bindings,
//! so these tests check what a binding lets a principal do, not only that it is listed.
//! dlqctl itself connects to the SASL listener as the stack's super user (its password in
//! `secretProperties`), as it would to a secured cluster; the limited user
//! (`DLQCTL_KAFKA_SASL_USER`) has no binding but those a test makes.
//!
//! tansu 0.6.0 stores no binding and has no SASL listener: on the fallback these tests skip
//! loudly (and fail under CI=true).

mod support;

use std::time::{Duration, Instant};

use dlqctl::backend::kafka::ffi::{self, AclOperation, Grant};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use support::block;
use support::kafka::Fixture;

fn sasl_bootstrap() -> String {
    support::var("DLQCTL_KAFKA_SASL_BOOTSTRAP", "127.0.0.1:9094")
}

/// The limited user's principal.
fn user() -> String {
    format!(
        "User:{}",
        support::var("DLQCTL_KAFKA_SASL_USER", "dlqctl-user")
    )
}

/// A client config for the limited user on the SASL listener.
fn as_user() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", sasl_bootstrap())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-256")
        .set(
            "sasl.username",
            support::var("DLQCTL_KAFKA_SASL_USER", "dlqctl-user"),
        )
        .set(
            "sasl.password",
            support::var("DLQCTL_KAFKA_SASL_USER_PASSWORD", "dlqctl-user-secret"),
        );
    c
}

/// A fixture whose targets file sends dlqctl to the SASL listener as the super user, with the
/// password read from the environment (`secretProperties`), as on a secured cluster.
fn fixture() -> Option<Fixture> {
    if !support::kafka::apache_kafka(
        "ACLs under an authorizer (tansu 0.6.0 keeps no binding and has no SASL listener)",
    ) {
        return None;
    }
    let mut f = Fixture::new()?;
    let plain = format!("bootstrapServers: {}", support::kafka_bootstrap());
    let sasl = format!(
        "bootstrapServers: {}\n    properties:\n      security.protocol: SASL_PLAINTEXT\n      sasl.mechanism: SCRAM-SHA-512\n      sasl.username: {}\n    secretProperties:\n      sasl.password: DLQCTL_TEST_KAFKA_PASSWORD",
        sasl_bootstrap(),
        support::var("DLQCTL_KAFKA_SASL_ADMIN", "dlqctl-admin"),
    );
    f.edit_targets(|t| {
        assert!(t.contains(&plain), "{t}");
        t.replace(&plain, &sasl)
    });
    let password = support::var("DLQCTL_KAFKA_SASL_ADMIN_PASSWORD", "dlqctl-admin-secret");
    f.set_env("DLQCTL_TEST_KAFKA_PASSWORD", &password);
    Some(f)
}

/// Produces one record as the limited user: `Ok`, or the broker's error (its name).
fn produce_as_user(topic: &str) -> Result<(), String> {
    let producer: FutureProducer = as_user()
        .set("message.timeout.ms", "10000")
        .create()
        .expect("producer");
    block(
        producer.send(
            FutureRecord::to(topic)
                .key("k")
                .payload("from the limited user"),
            Duration::from_secs(10),
        ),
    )
    .map(|_| ())
    .map_err(|(e, _)| format!("{e:?}"))
}

/// Reads `topic`'s three partitions from the start as the limited user (by assignment, no group):
/// the first record's body, or the first error; bounded by 15 s.
fn read_as_user(topic: &str) -> Result<String, String> {
    use rdkafka::Message;
    // librdkafka wants a group id even to assign; nothing is committed, and Fetch by
    // assignment asks only for READ on the topic.
    let consumer: BaseConsumer = as_user()
        .set("group.id", "dlqctl-tests-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                return Ok(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            }
            // librdkafka looks up the group's coordinator all the same; the group has no
            // binding, and the fetch does not need one.
            Some(Err(e)) if format!("{e:?}").contains("GroupAuthorizationFailed") => {}
            Some(Err(e)) => return Err(format!("{e:?}")),
            None => {}
        }
    }
    Err("nothing read within 15 s".into())
}

fn grant(topic: &str, operation: AclOperation, principal: &str) -> Grant {
    Grant {
        topic: topic.to_owned(),
        operation,
        principal: principal.to_owned(),
    }
}

#[test]
fn kafka_acls_are_applied_enforced_by_the_authorizer_and_a_removed_principal_loses_its_binding() {
    let Some(f) = fixture() else { return };
    let main = f.main();
    let dlt = format!("{main}-dlt");
    let user = user();
    let acls = |produce: &str| {
        let produce = produce.to_owned();
        move |t: String| {
            t.replace(
                "  kafka:\n",
                &format!(
                    "  kafka:\n    acls:\n      produce: [{produce}]\n      readDeadLetters: [\"User:CN=ops, O=acme\"]\n"
                ),
            )
        }
    };
    f.write_example(acls(&user));
    let p = f.plan();
    p.exits(2);
    let planned: Vec<&str> = p.stdout.lines().filter(|l| l.contains(" acl ")).collect();
    assert_eq!(
        planned,
        [
            format!("    + create     acl {main} WRITE {user}"),
            format!("    + create     acl {dlt} READ User:CN=ops, O=acme"),
        ],
        "{}",
        p.stdout
    );
    let (_, second) = f.first_apply("kafka.acls");
    second.ok();

    // The authorizer lets the producer write its topic, and nothing else.
    produce_as_user(&main).unwrap_or_else(|e| panic!("WRITE on {main} was granted: {e}"));
    let denied = produce_as_user(&dlt).expect_err("no WRITE on the DLT");
    assert!(denied.contains("TopicAuthorization"), "{denied}");

    // Another principal in `produce`: the first one's binding is planned as a delete, and
    // applied with --allow-delete; the authorizer then refuses the first principal.
    f.write_example(acls("User:orders-api"));
    let p = f.plan();
    p.assert_stdout_contains(&format!("- delete     acl {main} WRITE {user}\n"));
    p.assert_stdout_contains(&format!("+ create     acl {main} WRITE User:orders-api\n"));
    let a = f.apply(&["--allow-delete"]);
    a.ok();
    f.assert_empty_plan("after the principal changed");
    let denied = produce_as_user(&main).expect_err("the binding was deleted");
    assert!(denied.contains("TopicAuthorization"), "{denied}");
    // Kafka keeps bindings after their topic is deleted: remove this channel's.
    let _ = block(ffi::delete_acls(
        &support::kafka::admin(),
        vec![
            grant(&main, AclOperation::Write, "User:orders-api"),
            grant(&dlt, AclOperation::Read, "User:CN=ops, O=acme"),
        ],
        Duration::from_secs(10),
    ));
}

#[test]
fn a_principal_that_may_read_the_dead_letters_but_not_their_source_is_noted_and_the_authorizer_agrees()
 {
    let Some(f) = fixture() else { return };
    let main = f.main();
    let dlt = format!("{main}-dlt");
    let user = user();
    f.write_example(|t| t);
    f.first_apply("no acls");
    let p = f.plan();
    assert!(
        !p.stdout.contains("may read this dead-letter topic"),
        "{}",
        p.stdout
    );

    // A hand-made binding, as an operator would add one: the limited user may read the DLT.
    let admin = support::kafka::admin();
    let answers = block(ffi::create_acls(
        &admin,
        vec![grant(&dlt, AclOperation::Read, &user)],
        Duration::from_secs(10),
    ))
    .expect("CreateAcls");
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let producer: FutureProducer = support::kafka::producer(&[]);
    for topic in [&main, &dlt] {
        let body = format!("a record of {topic}");
        block(producer.send(
            FutureRecord::to(topic).key("k").payload(&body),
            Duration::from_secs(10),
        ))
        .map_err(|(e, _)| e)
        .expect("produce");
    }

    let p = f.plan();
    p.assert_stdout_contains(&format!(
        "`{user}` may read this dead-letter topic but not its source {main} (ACLs)"
    ));
    // What the note says is what the authorizer does.
    let read = read_as_user(&dlt).unwrap_or_else(|e| panic!("READ on {dlt}: {e}"));
    assert_eq!(read, format!("a record of {dlt}"));
    // librdkafka reports the refused Fetch of an assigned partition as an error or not at
    // all; either way nothing is read, though a record is there (read below once granted).
    let denied = read_as_user(&main);
    assert!(denied.is_err(), "no READ on the source: {denied:?}");

    // Once the principal may read the source too, there is nothing to note.
    let answers = block(ffi::create_acls(
        &admin,
        vec![grant(&main, AclOperation::Read, &user)],
        Duration::from_secs(10),
    ))
    .expect("CreateAcls");
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let p = f.plan();
    assert!(
        !p.stdout.contains("may read this dead-letter topic"),
        "{}",
        p.stdout
    );
    assert_eq!(
        read_as_user(&main).as_deref(),
        Ok(format!("a record of {main}").as_str())
    );
    // The hand-made bindings outlive the topics in Kafka: remove them.
    let _ = block(ffi::delete_acls(
        &admin,
        vec![
            grant(&dlt, AclOperation::Read, &user),
            grant(&main, AclOperation::Read, &user),
        ],
        Duration::from_secs(10),
    ));
}
