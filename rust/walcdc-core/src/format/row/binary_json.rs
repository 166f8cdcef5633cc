//! CUBRID's binary JSON (§8.4), as JSON text.

use super::*;

/// CUBRID's binary JSON (§8.4) as JSON text.
pub(super) fn json_text(b: &[u8], depth: u32) -> Result<String, String> {
    let mut out = String::new();
    let mut pos = 0;
    json_node(b, &mut pos, &mut out, depth)?;
    Ok(out)
}

pub(super) fn json_word(b: &[u8], pos: &mut usize) -> Result<i32, String> {
    let v = be_i32(b, *pos).ok_or_else(|| short("JSON value"))?;
    *pos += 4;
    Ok(v)
}

pub(super) fn json_string(b: &[u8], pos: &mut usize) -> Result<String, String> {
    let len = json_word(b, pos)?;
    let len = usize::try_from(len).map_err(|_| format!("JSON string of length {len}"))?;
    let bytes = b.get(*pos..*pos + len).ok_or_else(|| short("JSON string"))?;
    let text = match bytes.split_last() {
        Some((0, t)) => t,
        _ => bytes,
    };
    *pos = align4(*pos + len);
    Ok(String::from_utf8_lossy(text).into_owned())
}

pub(super) fn json_node(b: &[u8], pos: &mut usize, out: &mut String, depth: u32) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("JSON nested too deeply".into());
    }
    match json_word(b, pos)? {
        0 => out.push_str("null"),
        2 => {
            let unsigned = json_word(b, pos)? != 0;
            let v = json_word(b, pos)?;
            let _ = if unsigned { write!(out, "{}", v as u32) } else { write!(out, "{v}") };
        }
        3 => {
            let unsigned = json_word(b, pos)? != 0;
            let v = be_i64(b, *pos).ok_or_else(|| short("JSON bigint"))?;
            *pos += 8;
            let _ = if unsigned { write!(out, "{}", v as u64) } else { write!(out, "{v}") };
        }
        4 => {
            let v = f64::from_bits(be_u64(b, *pos).ok_or_else(|| short("JSON double"))?);
            *pos += 8;
            push_json_f64(out, v);
        }
        5 => push_json_str(out, &json_string(b, pos)?),
        6 => {
            let n = json_word(b, pos)?;
            out.push('{');
            for i in 0..n.max(0) {
                if i > 0 {
                    out.push(',');
                }
                push_json_str(out, &json_string(b, pos)?);
                out.push(':');
                json_node(b, pos, out, depth + 1)?;
            }
            out.push('}');
        }
        7 => {
            let n = json_word(b, pos)?;
            out.push('[');
            for i in 0..n.max(0) {
                if i > 0 {
                    out.push(',');
                }
                json_node(b, pos, out, depth + 1)?;
            }
            out.push(']');
        }
        8 => out.push_str(if json_word(b, pos)? != 0 { "true" } else { "false" }),
        t => return Err(format!("JSON node of unknown type {t}")),
    }
    Ok(())
}
