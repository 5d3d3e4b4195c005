//! `[[device]]` tables.

use crate::error::{Located, Res, Span};
use crate::fields::{Field, TableView};
use crate::model::{min_ratio_excess, DeviceSpec};
use crate::section::{optional, table_list, valid_name, ModelValidator, Unique};
use std::collections::BTreeMap;
use wb_engine::DeviceConfig;

/// The engine tracks per-device state in small tables; 64 is plenty.
const MAX_DEVICES: usize = 64;
/// Device keys that are not knobs.
const FIXED_KEYS: &[&str] = &["name", "model", "params"];

/// All `[[device]]` tables, in file order.
pub(crate) fn parse_devices(
    root: &TableView<'_>,
    text: &str,
    validate_model: &ModelValidator<'_>,
) -> Res<Vec<DeviceSpec>> {
    let mut names = Unique::new(text, "device");
    let mut devices: Vec<DeviceSpec> = Vec::new();
    for (index, table) in table_list(root, "device", MAX_DEVICES)?.iter().enumerate() {
        let (device, min_ratio_span) = parse_device(table, index, &mut names, validate_model)?;
        devices.push(device);
        // Checked as each device is added, so the error points at the
        // min_ratio that tipped the sum over.
        let shares = devices.iter().map(|d| (d.name.as_str(), &d.config));
        if let Some(message) = min_ratio_excess(shares) {
            return Err(Located::new(
                min_ratio_span.or_else(|| table.header()),
                message,
            ));
        }
    }
    Ok(devices)
}

/// One device, and where its `min_ratio` is (for the sum check).
fn parse_device(
    table: &TableView<'_>,
    index: usize,
    names: &mut Unique<'_>,
    validate_model: &ModelValidator<'_>,
) -> Res<(DeviceSpec, Span)> {
    let name_field = table
        .require("name")
        .map_err(|e| e.within(&format!("device #{}", index + 1)))?;
    let name = valid_name(&name_field)?;
    names.insert(&name, &name_field)?;
    let known: Vec<&str> = FIXED_KEYS
        .iter()
        .chain(DeviceConfig::KNOBS)
        .copied()
        .collect();
    table.check_keys(&known, |key| {
        format!(
            "unknown key '{key}' in device '{name}' (known: {})",
            known.join(", ")
        )
    })?;
    let context = format!("device '{name}'");
    let (model, config, params) =
        device_body(table, validate_model).map_err(|e| e.within(&context))?;
    let min_ratio_span = table.get("min_ratio").and_then(|f| f.value_span());
    let device = DeviceSpec {
        name,
        model,
        config,
        params,
    };
    Ok((device, min_ratio_span))
}

type DeviceBody = (String, DeviceConfig, BTreeMap<String, String>);

/// Model, knobs and params; the model is validated last, with its params.
fn device_body(table: &TableView<'_>, validate_model: &ModelValidator<'_>) -> Res<DeviceBody> {
    let model_field = table.require("model")?;
    let model = model_field.str()?.to_string();
    let config = knobs(table)?;
    let params = optional(table, "params", params)?.unwrap_or_default();
    validate_model(&model, &params)
        .map_err(|message| Located::new(model_field.value_span(), message))?;
    Ok((model, config, params))
}

/// The device's knobs, set in file order through `DeviceConfig::set` so
/// the file and `--set` accept exactly the same values.
fn knobs(table: &TableView<'_>) -> Res<DeviceConfig> {
    let mut config = DeviceConfig::default();
    for field in table.fields() {
        if FIXED_KEYS.contains(&field.key) {
            continue;
        }
        let value = field.knob_text(true)?;
        config
            .set(field.key, &value)
            .map_err(|e| Located::new(field.value_span(), e.to_string()))?;
    }
    Ok(config)
}

/// `[device.params]`: opaque to us, so values travel as text.
fn params(field: &Field<'_>) -> Res<BTreeMap<String, String>> {
    let table = field.table()?;
    let mut params = BTreeMap::new();
    for param in table.fields() {
        let value = param.param_text().map_err(|e| e.within("params"))?;
        params.insert(param.key.to_string(), value);
    }
    Ok(params)
}
