// The reference transform, in JavaScript (world `transform`, built with
// ComponentizeJS): parses the JSON value, uppercases one field, adds a field,
// drops records flagged for dropping, and fails a value that is not a JSON
// object with a `data` error. Tombstones (no value) pass through untouched.
//
// | key             | default      | meaning                                   |
// |-----------------|--------------|-------------------------------------------|
// | uppercase.field | status       | string field to uppercase                 |
// | add.field       | processed_by | field to add                              |
// | add.value       | sluice       | its value                                 |
// | drop.field      | drop         | records whose value has it set to `true` are dropped |
//
// WIT to JavaScript: list<u8> is a Uint8Array, option<T> is T or undefined,
// s64 is a BigInt, an enum is its case name as a string; a function
// returning result<T, E> returns T or throws E; list<result<..>> holds
// {tag: "ok", val} and {tag: "err", val}.

const DEFAULTS = {
  "uppercase.field": "status",
  "add.field": "processed_by",
  "add.value": "sluice",
  "drop.field": "drop",
};

let config = { ...DEFAULTS };
const utf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

class DataError {
  constructor(message) {
    this.payload = { class: "data", message };
  }
}

// The records `record` becomes; throws a DataError if it is bad.
function apply(record) {
  if (record.value === undefined) {
    return [record]; // a tombstone passes through untouched
  }
  let value;
  try {
    value = JSON.parse(utf8.decode(record.value));
  } catch (e) {
    throw new DataError(
      `value of ${record.topic}-${record.partition}@${record.offset} is not JSON: ${e.message}`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new DataError("value is JSON but not an object");
  }
  if (value[config["drop.field"]] === true) {
    return [];
  }
  const field = config["uppercase.field"];
  if (typeof value[field] === "string") {
    value[field] = value[field].toUpperCase();
  }
  value[config["add.field"]] = config["add.value"];
  record.value = encoder.encode(JSON.stringify(value));
  return [record];
}

export const transformer = {
  configure(pairs) {
    const next = { ...DEFAULTS };
    for (const [key, value] of pairs) {
      if (!(key in DEFAULTS)) {
        throw {
          class: "fatal",
          message: `unknown config key \`${key}\` (known: ${Object.keys(DEFAULTS).join(", ")})`,
        };
      }
      next[key] = value;
    }
    config = next;
  },

  transform(record) {
    try {
      return apply(record);
    } catch (e) {
      if (e instanceof DataError) throw e.payload;
      throw e;
    }
  },

  transformBatch(records) {
    return records.map((record) => {
      try {
        return { tag: "ok", val: apply(record) };
      } catch (e) {
        if (e instanceof DataError) return { tag: "err", val: e.payload };
        throw e;
      }
    });
  },
};
