//! One error type for everything that can go wrong reading a log set. Every variant names the
//! volume (file) and, where one applies, the log address.

use crate::format::lsa::Lsa;

pub type Result<T> = std::result::Result<T, LogError>;

fn at(lsa: &Option<Lsa>) -> String {
    match lsa {
        Some(l) => format!(" at LSA {l}"),
        None => String::new(),
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// The file could not be opened, mapped or listed, or an object could not be read from
    /// object storage (after retries).
    #[error("{file}{}: {msg}", at(.lsa))]
    Io { file: String, lsa: Option<Lsa>, msg: String },
    /// Not a CUBRID log volume (wrong magic, bad header page, impossible page size).
    #[error("{file}: not a CUBRID log volume: {msg}")]
    BadHeader { file: String, msg: String },
    /// Volumes that do not belong together (different `db_creation`, page size, duplicates).
    #[error("{file}: {msg}")]
    Mismatch { file: String, msg: String },
    /// A page whose stored checksum does not match its sampled CRC-32.
    #[error("{file}: checksum mismatch on log page {pageid}{}: stored {stored:#010x}, computed {computed:#010x}", at(.lsa))]
    Checksum { file: String, lsa: Option<Lsa>, pageid: i64, stored: u32, computed: u32 },
    /// A volume shorter than its header says, or a log that ends inside a record it must hold.
    #[error("{file}: truncated{}: {msg}", at(.lsa))]
    Truncated { file: String, lsa: Option<Lsa>, msg: String },
    /// A page that only an archive can hold, and that archive is not in the set.
    #[error("{file}: missing archive{}: {msg}", at(.lsa))]
    MissingArchive { file: String, lsa: Option<Lsa>, msg: String },
    /// A TDE-encrypted page had to be read and no key is available.
    #[error("{file}: log page {pageid} is TDE-encrypted{}; its records cannot be read without the key", at(.lsa))]
    Encrypted { file: String, lsa: Option<Lsa>, pageid: i64 },
    /// A record that cannot be what the writer wrote (bad type, links, lengths, layout).
    #[error("{file}: corrupt record{}: {msg}", at(.lsa))]
    CorruptRecord { file: String, lsa: Option<Lsa>, msg: String },
    /// The log holds data records but no supplemental records: change events cannot be made.
    #[error("{file}: the log holds no supplemental records, so change events cannot be produced: the database ran with supplemental_log=0. Set supplemental_log=1 (or 2) in cubrid.conf and restart the server; changes written before that are not recoverable as events")]
    NoSupplementalLog { file: String },
    /// A caller's argument that does not fit the log (an unknown option, a bad cursor).
    #[error("{msg}")]
    InvalidArgument { msg: String },
    /// A position a caller gave that is no record of the log (past its end, not where a record
    /// starts).
    #[error("{file}: {msg}")]
    BadPosition { file: String, lsa: Lsa, msg: String },
}

impl LogError {
    pub fn file(&self) -> Option<&str> {
        match self {
            LogError::Io { file, .. }
            | LogError::BadHeader { file, .. }
            | LogError::Mismatch { file, .. }
            | LogError::Checksum { file, .. }
            | LogError::Truncated { file, .. }
            | LogError::MissingArchive { file, .. }
            | LogError::Encrypted { file, .. }
            | LogError::CorruptRecord { file, .. }
            | LogError::NoSupplementalLog { file }
            | LogError::BadPosition { file, .. } => Some(file),
            LogError::InvalidArgument { .. } => None,
        }
    }

    pub fn lsa(&self) -> Option<Lsa> {
        match self {
            LogError::Io { lsa, .. }
            | LogError::Checksum { lsa, .. }
            | LogError::Truncated { lsa, .. }
            | LogError::MissingArchive { lsa, .. }
            | LogError::Encrypted { lsa, .. }
            | LogError::CorruptRecord { lsa, .. } => *lsa,
            LogError::BadPosition { lsa, .. } => Some(*lsa),
            _ => None,
        }
    }

    /// The error of reading log page `pageid` for a reader at `lsa`: the LSA filled in where
    /// the error has none.
    pub fn at(self, at_lsa: Lsa, pageid: i64) -> LogError {
        let fill = |lsa: Option<Lsa>| lsa.or(Some(at_lsa));
        match self {
            LogError::Io { file, lsa, msg } => {
                LogError::Io { file, lsa: fill(lsa), msg: format!("log page {pageid}: {msg}") }
            }
            LogError::Truncated { file, lsa, msg } => {
                LogError::Truncated { file, lsa: fill(lsa), msg: format!("log page {pageid}: {msg}") }
            }
            LogError::MissingArchive { file, lsa, msg } => {
                LogError::MissingArchive { file, lsa: fill(lsa), msg: format!("log page {pageid}: {msg}") }
            }
            other => other,
        }
    }

    pub(crate) fn corrupt(file: &str, lsa: Lsa, msg: impl Into<String>) -> LogError {
        LogError::CorruptRecord { file: file.to_string(), lsa: Some(lsa), msg: msg.into() }
    }
}
