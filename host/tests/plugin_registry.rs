//! Loads real plugin files through the registry and calls their modes as the alignment step
//! does: results come back, a panicking plugin comes back as an error and the host carries on.

#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use flowscale::plugins::{ModeOrigin, ModeRegistry, PluginStatus};
use flowscale_sdk::{AlignmentContext, ModeParams, ShipStrategy};
use flowscale_tests::{build, plugin_file, plugins_dir};

fn params(name: &str, pairs: &[(&str, &str)]) -> ModeParams {
    ModeParams::new(
        name,
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// Collects the host's log output.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[test]
fn plugin_modes_align_through_the_registry_and_panics_are_contained() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let profile = build(&["bucket-align", "slot-align", "fixture-panicking"]);
    let bucket = plugin_file(&profile, "bucket-align");
    let slot = plugin_file(&profile, "slot-align");
    let panicking = plugin_file(&profile, "fixture-panicking");
    let dir = plugins_dir(&[
        (&bucket, "libbucket_align.so"),
        (&slot, "libslot_align.so"),
        (&panicking, "libfixture_panicking.so"),
    ]);

    let (registry, reports) = ModeRegistry::discover(dir.path());
    assert_eq!(reports.len(), 3, "{reports:#?}");
    assert!(
        reports.iter().all(|r| r.status == PluginStatus::Loaded),
        "{reports:#?}"
    );
    assert_eq!(
        registry.ids(),
        vec!["bucket-align", "panicking", "slot-align"]
    );

    let mode = registry.get("bucket-align").unwrap();
    assert!(matches!(
        &mode.origin,
        ModeOrigin::Plugin { plugin, .. } if plugin == "bucket-align"
    ));
    // The context crosses the boundary whole: ship strategies, limits and parameters.
    let ctx = AlignmentContext::builder(16, 24, 1024)
        .identity("job", "v", "windowed")
        .input_ship_strategies(vec![ShipStrategy::Custom { buckets: 128 }])
        .params(params(
            "buckets",
            &[("class", "bucket-align"), ("rule", "DIVISOR")],
        ))
        .build();
    assert_eq!(mode.mode.is_applicable(&ctx), Ok(true));
    assert_eq!(mode.mode.align(&ctx), Ok(32));
    let err = mode
        .mode
        .validate(&params("buckets", &[("rule", "SOMETIMES")]))
        .unwrap_err();
    assert!(
        err.message()
            .contains("scaling.alignment.mode.buckets.rule"),
        "{err}"
    );

    let slot = registry.get("slot-align").unwrap();
    let ctx = AlignmentContext::builder(4, 9, 128)
        .params(params("slots", &[("slots-per-worker", "4")]))
        .build();
    assert_eq!(slot.mode.align(&ctx), Ok(16));

    // A panic inside the plugin is an error naming the panic, and the host keeps going.
    let bad = registry.get("panicking").unwrap();
    for _ in 0..3 {
        let err = bad.mode.align(&ctx).unwrap_err();
        assert!(
            err.message().contains("boom: the panicking fixture"),
            "{err}"
        );
        assert!(err.message().contains("fixture-panicking"), "{err}");
    }
    // A panic in the gate comes back as the gate's error, for the alignment guard to report.
    let gate = AlignmentContext::builder(4, 9, 128)
        .identity("job", "v", "panic-in-gate")
        .build();
    let err = bad.mode.is_applicable(&gate).unwrap_err();
    assert!(err.message().contains("boom in the gate"), "{err}");
    assert!(err.message().contains("is_applicable"), "{err}");
    let err = bad.mode.validate(&params("p", &[])).unwrap_err();
    assert!(err.message().contains("boom in validate"), "{err}");
    // ...and the other plugins still answer.
    assert_eq!(slot.mode.align(&ctx), Ok(16));

    // The plugins' own logs and panic reports reach the host's tracing.
    let text = logs.text();
    assert!(text.contains("about to panic"), "{text}");
    assert!(
        text.contains("boom: the panicking fixture always panics"),
        "{text}"
    );
    assert!(
        text.contains("plugin_target=\"fixture-panicking\""),
        "{text}"
    );
    assert!(text.contains("slot-align"), "{text}");
}
