//! Java classes the hot paths create arrays of, looked up once and kept as global
//! references (a `FindClass` per call costs more than the rest of a decision cycle).

use std::sync::OnceLock;

use jni::objects::{GlobalRef, JClass};
use jni::JNIEnv;

use crate::boundary::Result;

pub(crate) struct Classes {
    pub(crate) string: GlobalRef,
    pub(crate) object: GlobalRef,
    pub(crate) bytes: GlobalRef,
}

static CLASSES: OnceLock<Classes> = OnceLock::new();

/// The cached classes, looked up on first use.
pub(crate) fn classes(env: &mut JNIEnv<'_>) -> Result<&'static Classes> {
    if let Some(classes) = CLASSES.get() {
        return Ok(classes);
    }
    let string = env.find_class("java/lang/String")?;
    let object = env.find_class("java/lang/Object")?;
    let bytes = env.find_class("[B")?;
    let classes = Classes {
        string: env.new_global_ref(string)?,
        object: env.new_global_ref(object)?,
        bytes: env.new_global_ref(bytes)?,
    };
    // Another thread may have won the race; either value is the same classes.
    let _ = CLASSES.set(classes);
    Ok(CLASSES.get().expect("set just above or by another thread"))
}

/// A global class reference as the `JClass` the array constructors take.
pub(crate) fn class(global: &GlobalRef) -> &JClass<'static> {
    <&JClass>::from(global.as_obj())
}
