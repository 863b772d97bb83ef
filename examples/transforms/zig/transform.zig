//! The reference transform, in Zig (world `bytes`: one encoded buffer in,
//! one out; the encoding is in sdk/wit/README.md): parses the JSON value,
//! uppercases one field, adds a field, drops records flagged for dropping,
//! and fails a value that is not a JSON object with a `data` error.
//! Tombstones pass untouched; everything else in a record (topic, key,
//! headers, ...) is copied through unchanged.
//!
//! | key             | default      | meaning                                   |
//! |-----------------|--------------|-------------------------------------------|
//! | uppercase.field | status       | string field to uppercase                 |
//! | add.field       | processed_by | field to add                              |
//! | add.value       | sluice       | its value                                 |
//! | drop.field      | drop         | records whose value has it set to `true` are dropped |
//!
//! Built for wasm32-freestanding: no WASI at all. Uppercasing covers ASCII,
//! Latin-1, and the basic Greek and Cyrillic letters.

const std = @import("std");

// ---- Memory shared with the host (the canonical ABI) ----

/// Everything a call allocates; freed when the host allocates the next
/// call's argument (by then it has read the previous call's result).
var arena = std.heap.ArenaAllocator.init(std.heap.wasm_allocator);

/// The host allocates each call's argument buffer through this.
export fn cabi_realloc(old: ?[*]u8, old_size: usize, alignment: usize, new_size: usize) ?[*]u8 {
    _ = alignment; // every block is 8-aligned, enough for any type
    if (old == null) _ = arena.reset(.retain_capacity);
    const a = arena.allocator();
    const block = a.alignedAlloc(u8, 8, new_size) catch return null;
    if (old) |o| @memcpy(block[0..@min(old_size, new_size)], o[0..@min(old_size, new_size)]);
    return block.ptr;
}

/// Where a function returning `list<u8>` leaves its (pointer, length).
var ret_area: [2]u32 align(8) = .{ 0, 0 };

fn give(bytes: []const u8) [*]u8 {
    ret_area[0] = @intCast(@intFromPtr(bytes.ptr));
    ret_area[1] = @intCast(bytes.len);
    return @ptrCast(&ret_area);
}

// ---- The v1 encoding ----

const Reader = struct {
    buf: []const u8,
    pos: usize = 0,

    fn take(r: *Reader, n: usize) error{Truncated}![]const u8 {
        if (r.buf.len - r.pos < n) return error.Truncated;
        defer r.pos += n;
        return r.buf[r.pos .. r.pos + n];
    }
    fn int(r: *Reader, comptime T: type) !T {
        return std.mem.readInt(T, (try r.take(@sizeOf(T)))[0..@sizeOf(T)], .little);
    }
    fn bytes(r: *Reader) ![]const u8 {
        return r.take(try r.int(u32));
    }
    fn opt(r: *Reader, comptime what: enum { i64, bytes }) !?(if (what == .i64) i64 else []const u8) {
        return switch ((try r.take(1))[0]) {
            0 => null,
            1 => if (what == .i64) try r.int(i64) else try r.bytes(),
            else => error.BadOption,
        };
    }
};

const Writer = struct {
    out: std.ArrayList(u8),

    fn int(w: *Writer, comptime T: type, v: T) !void {
        var b: [@sizeOf(T)]u8 = undefined;
        std.mem.writeInt(T, &b, v, .little);
        try w.out.appendSlice(&b);
    }
    fn bytes(w: *Writer, b: []const u8) !void {
        try w.int(u32, @intCast(b.len));
        try w.out.appendSlice(b);
    }
    fn optBytes(w: *Writer, b: ?[]const u8) !void {
        if (b) |v| {
            try w.out.append(1);
            try w.bytes(v);
        } else try w.out.append(0);
    }
};

const Header = struct { key: []const u8, value: ?[]const u8 };

const Record = struct {
    topic: []const u8,
    partition: i32,
    offset: i64,
    timestamp: ?i64,
    key: ?[]const u8,
    value: ?[]const u8,
    headers: []Header,

    fn read(r: *Reader, a: std.mem.Allocator) !Record {
        var rec: Record = .{
            .topic = try r.bytes(),
            .partition = try r.int(i32),
            .offset = try r.int(i64),
            .timestamp = try r.opt(.i64),
            .key = try r.opt(.bytes),
            .value = try r.opt(.bytes),
            .headers = &.{},
        };
        const n = try r.int(u32);
        if (n > r.buf.len) return error.Truncated; // each header takes bytes
        rec.headers = try a.alloc(Header, n);
        for (rec.headers) |*h| h.* = .{ .key = try r.bytes(), .value = try r.opt(.bytes) };
        return rec;
    }

    fn write(rec: Record, w: *Writer) !void {
        try w.bytes(rec.topic);
        try w.int(i32, rec.partition);
        try w.int(i64, rec.offset);
        if (rec.timestamp) |t| {
            try w.out.append(1);
            try w.int(i64, t);
        } else try w.out.append(0);
        try w.optBytes(rec.key);
        try w.optBytes(rec.value);
        try w.int(u32, @intCast(rec.headers.len));
        for (rec.headers) |h| {
            try w.bytes(h.key);
            try w.optBytes(h.value);
        }
    }
};

const Class = enum(u8) { data = 0, retriable = 1, fatal = 2 };

// ---- Config ----

const Config = struct {
    uppercase_field: []const u8 = "status",
    add_field: []const u8 = "processed_by",
    add_value: []const u8 = "sluice",
    drop_field: []const u8 = "drop",
};
var config: Config = .{};
/// The config's strings live here (the arena is reset between calls).
var config_storage = std.heap.ArenaAllocator.init(std.heap.wasm_allocator);

export fn configure(ptr: [*]const u8, len: usize) [*]u8 {
    const a = arena.allocator();
    var w: Writer = .{ .out = std.ArrayList(u8).init(a) };
    configureInto(ptr[0..len], &w) catch {
        // Out of memory, or a malformed buffer: a fatal status.
        w.out.clearRetainingCapacity();
        w.out.appendSlice(&.{ 1, 1, @intFromEnum(Class.fatal) }) catch unreachable;
        w.bytes("configure: malformed config buffer") catch unreachable;
    };
    return give(w.out.items);
}

fn configureInto(buf: []const u8, w: *Writer) !void {
    var r: Reader = .{ .buf = buf };
    if ((try r.take(1))[0] != 1) return error.BadVersion;
    var next: Config = .{};
    _ = config_storage.reset(.retain_capacity);
    const keep = config_storage.allocator();
    var n = try r.int(u32);
    while (n > 0) : (n -= 1) {
        const key = try r.bytes();
        const value = try keep.dupe(u8, try r.bytes());
        if (std.mem.eql(u8, key, "uppercase.field")) {
            next.uppercase_field = value;
        } else if (std.mem.eql(u8, key, "add.field")) {
            next.add_field = value;
        } else if (std.mem.eql(u8, key, "add.value")) {
            next.add_value = value;
        } else if (std.mem.eql(u8, key, "drop.field")) {
            next.drop_field = value;
        } else {
            try w.out.appendSlice(&.{ 1, 1, @intFromEnum(Class.fatal) });
            try w.bytes(try std.fmt.allocPrint(arena.allocator(), "unknown config key `{s}` (known: uppercase.field, add.field, add.value, drop.field)", .{key}));
            return;
        }
    }
    config = next;
    try w.out.appendSlice(&.{ 1, 0 });
}

// ---- The transform ----

const Outcome = union(enum) {
    keep: Record,
    drop,
    fail: []const u8,
};

fn apply(a: std.mem.Allocator, rec: Record) !Outcome {
    const value = rec.value orelse return .{ .keep = rec }; // a tombstone passes through
    const parsed = std.json.parseFromSliceLeaky(std.json.Value, a, value, .{}) catch |e| {
        if (e == error.OutOfMemory) return e;
        return .{ .fail = try std.fmt.allocPrint(a, "value of {s}-{d}@{d} is not JSON: {s}", .{ rec.topic, rec.partition, rec.offset, @errorName(e) }) };
    };
    var object = switch (parsed) {
        .object => |o| o,
        else => return .{ .fail = "value is JSON but not an object" },
    };
    if (object.get(config.drop_field)) |d| {
        if (d == .bool and d.bool) return .drop;
    }
    if (object.getPtr(config.uppercase_field)) |field| {
        if (field.* == .string) field.* = .{ .string = try uppercase(a, field.string) };
    }
    try object.put(config.add_field, .{ .string = config.add_value });
    var out = rec;
    out.value = try std.json.stringifyAlloc(a, std.json.Value{ .object = object }, .{});
    return .{ .keep = out };
}

/// Uppercases ASCII, Latin-1 and the basic Greek and Cyrillic letters; any
/// other character is kept as it is.
fn uppercase(a: std.mem.Allocator, s: []const u8) ![]const u8 {
    var out = std.ArrayList(u8).init(a);
    var it = (try std.unicode.Utf8View.init(s)).iterator();
    while (it.nextCodepoint()) |c| {
        const u: u21 = switch (c) {
            'a'...'z' => c - 32,
            0xE0...0xF6, 0xF8...0xFE => c - 32, // à..ö, ø..þ
            0xFF => 0x178, // ÿ
            0x3B1...0x3C1, 0x3C3...0x3C9 => c - 32, // α..ρ, σ..ω
            0x3C2 => 0x3A3, // final sigma
            0x430...0x44F => c - 32, // а..я
            0x450...0x45F => c - 80, // ѐ..џ
            else => c,
        };
        var b: [4]u8 = undefined;
        const n = try std.unicode.utf8Encode(u, &b);
        try out.appendSlice(b[0..n]);
    }
    return out.items;
}

export fn @"transform-batch"(ptr: [*]const u8, len: usize) [*]u8 {
    const a = arena.allocator();
    var w: Writer = .{ .out = std.ArrayList(u8).init(a) };
    batch(a, ptr[0..len], &w) catch {
        // Out of memory, or a malformed batch: an empty (and so malformed)
        // answer makes the host replay the batch record by record.
        w.out.clearRetainingCapacity();
    };
    return give(w.out.items);
}

fn batch(a: std.mem.Allocator, buf: []const u8, w: *Writer) !void {
    var r: Reader = .{ .buf = buf };
    if ((try r.take(1))[0] != 1) return error.BadVersion;
    const n = try r.int(u32);
    try w.out.append(1);
    try w.int(u32, n);
    var i: u32 = 0;
    while (i < n) : (i += 1) {
        const rec = try Record.read(&r, a);
        switch (try apply(a, rec)) {
            .keep => |out| {
                try w.out.append(0);
                try w.int(u32, 1);
                try out.write(w);
            },
            .drop => {
                try w.out.append(0);
                try w.int(u32, 0);
            },
            .fail => |message| {
                try w.out.appendSlice(&.{ 1, @intFromEnum(Class.data) });
                try w.bytes(message);
            },
        }
    }
}
