//! The script's calling convention: arguments in the header's order, replies
//! read by shape, writes told apart, keys escaped.

use super::*;

const RULE: Rule = Rule {
    initial_ns: 1_000,
    max_ns: 8_000,
    jitter: 0.5,
    expire_after_ns: 16_000,
    ttl_ms: 24,
};

fn args(call: &Call<'_>) -> Vec<String> {
    call.to_redis_args()
        .into_iter()
        .map(|a| String::from_utf8(a).unwrap())
        .collect()
}

#[test]
fn a_call_writes_the_scripts_arguments_in_the_headers_order() {
    let call = Call {
        redis_key: "p:k".into(),
        op: Op::TryNext,
        now: ScriptNow::Nanos(42),
        age_ns: -7,
        rule: &RULE,
        draw: Draw::Scaled(0.25),
        id: Some(OpId(9)),
        extra: Extra::None,
    };
    assert_eq!(
        args(&call),
        [
            "1", "p:k", "try_next", "42", "-7", "1000", "8000", "0.25", "16000", "24", "9"
        ]
    );
    assert_eq!(call.num_of_args(), args(&call).len());
    let sentinels = Call {
        now: ScriptNow::RedisTime,
        draw: Draw::None,
        id: None,
        ..call
    };
    assert_eq!(
        args(&sentinels),
        [
            "1", "p:k", "try_next", "", "-7", "1000", "8000", "0", "16000", "24", ""
        ]
    );
}

#[test]
fn hold_and_resume_append_their_arguments() {
    let call = |extra| Call {
        redis_key: "p:k".into(),
        op: Op::Hold,
        now: ScriptNow::RedisTime,
        age_ns: 0,
        rule: &RULE,
        draw: Draw::None,
        id: None,
        extra,
    };
    let hold = call(Extra::hold(Duration::from_secs(2)));
    assert_eq!(args(&hold)[11..], ["2000000000"]);
    assert_eq!(hold.num_of_args(), 12);
    // Cut to what the script holds exactly: 2^52 - 1 ns.
    let long = call(Extra::hold(Duration::MAX));
    assert_eq!(args(&long)[11..], ["4503599627370495"]);
    let resume = call(Extra::resume(Level {
        backoff: Duration::from_millis(5),
        attempts: 3,
    }));
    assert_eq!(args(&resume)[11..], ["5000000", "3"]);
    assert_eq!(resume.num_of_args(), 13);
}

#[test]
fn replies_are_read_by_shape() {
    let int = Value::Int;
    let read = |v: Value| Reply::from_redis_value(v);
    assert_eq!(read(int(5)), Ok(Reply::Number(5)));
    assert_eq!(
        read(Value::Array(vec![int(1), int(2_000), int(2)])),
        Ok(Reply::Level {
            backoff_ns: 2_000,
            attempts: 2
        })
    );
    assert_eq!(
        read(Value::Array(vec![int(0), int(300)])),
        Ok(Reply::Refused { remaining_ns: 300 })
    );
    assert_eq!(
        read(Value::Array(vec![
            int(2),
            int(1),
            int(4_000),
            int(3),
            int(700)
        ])),
        Ok(Reply::Standing {
            level: Some((4_000, 3)),
            remaining_ns: 700
        })
    );
    assert_eq!(
        read(Value::Array(vec![int(2), int(0), int(0), int(0), int(0)])),
        Ok(Reply::Standing {
            level: None,
            remaining_ns: 0
        })
    );
    assert_eq!(
        read(Value::Array(vec![
            int(-1),
            Value::BulkString(b"a list".to_vec())
        ])),
        Ok(Reply::NotOurs {
            detail: "a list".into()
        })
    );
    for bad in [
        int(-3),
        Value::Nil,
        Value::Array(vec![]),
        Value::Array(vec![int(1), int(2)]),
        Value::Array(vec![int(0), int(-2)]),
        Value::Array(vec![int(2), int(1), int(5), int(1)]),
        Value::Array(vec![int(2), int(1), int(5), int(-1), int(0)]),
        Value::Array(vec![int(7), int(1)]),
    ] {
        assert!(read(bad.clone()).is_err(), "{bad:?}");
    }
}

#[test]
fn only_writes_count_as_written() {
    let call = |op, id| Call {
        redis_key: String::new(),
        op,
        now: ScriptNow::RedisTime,
        age_ns: 0,
        rule: &RULE,
        draw: Draw::None,
        id,
        extra: Extra::None,
    };
    let refused = Reply::Refused { remaining_ns: 1 };
    assert!(call(Op::Next, None).wrote(&Reply::Level {
        backoff_ns: 1,
        attempts: 1
    }));
    assert!(!call(Op::TryNext, None).wrote(&refused));
    assert!(call(Op::TryNext, Some(OpId(1))).wrote(&refused));
    assert!(call(Op::Reset, None).wrote(&Reply::Number(1)));
    assert!(!call(Op::Reset, None).wrote(&Reply::Number(0)));
    assert!(!call(Op::Attempts, None).wrote(&Reply::Number(1)));
    for op in [Op::Next, Op::TryNext, Op::Reset, Op::GcKey] {
        assert!(op.may_write());
    }
    assert!(!Op::Get.may_write());
}

#[test]
fn keys_are_escaped_so_no_two_pairs_share_an_entry() {
    assert_eq!(redis_key("a", "b:c"), "a:b%3Ac");
    assert_eq!(redis_key("a:b", "c"), "a:b:c");
    assert_eq!(redis_key("a", "50%"), "a:50%25");
    assert_eq!(redis_key("{t}", "{k}"), "{t}:{k}");
}
