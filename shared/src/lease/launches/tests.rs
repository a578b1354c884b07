use super::*;

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

fn named(id: &str, s: u64) -> Named {
    Named {
        id: id.into(),
        at: at(s),
    }
}

fn record(holder: Option<&str>, launches: Option<Launches>) -> LeaseRecord {
    LeaseRecord {
        holder: holder.map(str::to_string),
        renewed: Some(at(90)),
        acquired: Some(at(40)),
        duration: Some(Duration::from_secs(6)),
        transitions: 1,
        launches,
    }
}

#[test]
fn a_holder_names_its_launches_of_the_last_window_and_leaves_older_ones_to_the_bound() {
    let carried = Launches {
        since: at(50),
        named: vec![named("i-0old", 55), named("i-0recent", 85)],
    };
    // (case, carried, fallback, mine, now, since, named)
    type Row = (
        &'static str,
        Option<Launches>,
        u64,
        Vec<Named>,
        u64,
        u64,
        Vec<&'static str>,
    );
    let rows: Vec<Row> = vec![
        (
            "launches of the last 20 s are named, older ones pruned, the bound moved on",
            Some(carried.clone()),
            0,
            vec![named("i-0mine", 95)],
            100,
            80,
            vec!["i-0mine", "i-0recent"],
        ),
        (
            "the bound never goes back past what was carried",
            Some(carried.clone()),
            0,
            vec![],
            60,
            50,
            vec!["i-0old", "i-0recent"],
        ),
        (
            "with nothing carried, the holder's own acquisition bounds the earlier holders'",
            None,
            90,
            vec![named("i-0mine", 95)],
            100,
            90,
            vec!["i-0mine"],
        ),
        (
            "a launch named twice is named once",
            Some(carried),
            0,
            vec![named("i-0recent", 85)],
            100,
            80,
            vec!["i-0recent"],
        ),
    ];
    for (case, carried, fallback, mine, now, since, ids) in rows {
        let written = Launches::carry(carried.as_ref(), at(fallback), &mine, at(now));
        assert_eq!(written.since, at(since), "{case}");
        assert_eq!(written.ids().collect::<Vec<_>>(), ids, "{case}");
    }
}

#[test]
fn only_a_released_lease_tells_the_next_holder_its_earlier_launches() {
    let carried = Launches {
        since: at(80),
        named: vec![named("i-0a", 85)],
    };
    let released = record(None, Some(carried.clone()));
    let rows: [(&str, Option<LeaseRecord>, Step, Launches); 5] = [
        (
            "released: what it carries",
            Some(released),
            Step::Acquire,
            carried,
        ),
        (
            "released with none recorded: its release bounds them",
            Some(record(None, None)),
            Step::Acquire,
            Launches::bound(at(90)),
        ),
        (
            "taken over: only now",
            Some(record(Some("b"), None)),
            Step::TakeOver { from: "b".into() },
            Launches::bound(at(100)),
        ),
        (
            "created: only now",
            None,
            Step::Create,
            Launches::bound(at(100)),
        ),
        (
            "a bound after now (clocks apart): now",
            Some(record(None, Some(Launches::bound(at(120))))),
            Step::Acquire,
            Launches::bound(at(100)),
        ),
    ];
    for (case, lease, step, want) in rows {
        assert_eq!(
            earlier_launches(lease.as_ref(), &step, at(100)),
            want,
            "{case}"
        );
    }
}

#[test]
fn the_launches_read_back_as_written() {
    let launches = Launches {
        since: at(80),
        named: vec![named("i-0a", 85)],
    };
    let text = serde_json::to_string(&launches).unwrap();
    assert_eq!(serde_json::from_str::<Launches>(&text).unwrap(), launches);
}
