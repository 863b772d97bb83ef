//! Exact decimals: a JSON number's digits, and a Kafka Connect `Decimal`'s
//! unscaled value as Java's `BigInteger.toByteArray` writes it (big-endian
//! two's complement, as few bytes as hold the sign).

/// The most digits a decimal may have here: enough for any database's
/// NUMERIC, and no `1e999999999` blows up memory.
pub const MAX_DIGITS: usize = 4096;

/// A number's value: `±digits × 10^exp`, `digits` without leading zeros
/// (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    negative: bool,
    digits: String,
    exp: i64,
}

/// An integer, as the unscaled value of a decimal: its sign and its
/// digits without leading zeros (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unscaled {
    pub negative: bool,
    pub digits: String,
}

impl Decimal {
    /// A JSON number's text (as the JSON reader accepted it).
    pub fn parse(text: &str) -> Option<Decimal> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mantissa, exp) = match rest.split_once(['e', 'E']) {
            Some((m, e)) => {
                let e = e.strip_prefix('+').unwrap_or(e);
                // An exponent past any i64 is past MAX_DIGITS anyway.
                let exp = e.parse::<i64>().unwrap_or(if e.starts_with('-') {
                    i64::MIN / 2
                } else {
                    i64::MAX / 2
                });
                (m, exp)
            }
            None => (rest, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if whole.is_empty()
            || !whole
                .bytes()
                .chain(fraction.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let all = format!("{whole}{fraction}");
        let digits = all.trim_start_matches('0');
        // Trailing zeros move into the exponent.
        let trimmed = digits.trim_end_matches('0');
        let exp = exp
            .saturating_sub(fraction.len() as i64)
            .saturating_add((digits.len() - trimmed.len()) as i64);
        Some(Decimal {
            negative: negative && !trimmed.is_empty(),
            digits: trimmed.to_string(),
            exp: if trimmed.is_empty() { 0 } else { exp },
        })
    }

    /// The unscaled value at `scale` (`value × 10^scale`), if no digit is
    /// lost: `12.5` at scale 2 is 1250; `12.345` at scale 2 is an error.
    pub fn unscaled(&self, scale: i32) -> Result<Unscaled, String> {
        if self.digits.is_empty() {
            return Ok(Unscaled {
                negative: false,
                digits: String::new(),
            });
        }
        let shift = self.exp.saturating_add(i64::from(scale));
        if shift < 0 {
            return Err(format!(
                "has more than {scale} digit(s) after the decimal point"
            ));
        }
        let len = (self.digits.len() as i64).saturating_add(shift);
        if len > MAX_DIGITS as i64 {
            return Err(format!("has more than {MAX_DIGITS} digits"));
        }
        let mut digits = self.digits.clone();
        digits.extend(std::iter::repeat_n('0', shift as usize));
        Ok(Unscaled {
            negative: self.negative,
            digits,
        })
    }

    /// The value as an `i64`, if it is an integer in range; otherwise why
    /// not.
    pub fn to_i64(&self) -> Result<i64, &'static str> {
        let u = self.unscaled(0).map_err(|_| "is not an integer")?;
        u.to_i64().ok_or("is out of range")
    }
}

impl Unscaled {
    pub fn to_i64(&self) -> Option<i64> {
        if self.digits.is_empty() {
            return Some(0);
        }
        if self.digits.len() > 19 {
            return None;
        }
        let magnitude: i128 = self.digits.parse().ok()?;
        i64::try_from(if self.negative { -magnitude } else { magnitude }).ok()
    }

    /// Java's `BigInteger.toByteArray()`.
    pub fn to_twos_complement(&self) -> Vec<u8> {
        let mut magnitude = to_binary(&self.digits);
        if magnitude.is_empty() {
            return vec![0];
        }
        if !self.negative {
            if magnitude[0] & 0x80 != 0 {
                magnitude.insert(0, 0);
            }
            return magnitude;
        }
        // 2^(8n) - |x|: invert and add one.
        let mut out: Vec<u8> = magnitude.iter().map(|b| !b).collect();
        for b in out.iter_mut().rev() {
            let (sum, carry) = b.overflowing_add(1);
            *b = sum;
            if !carry {
                break;
            }
        }
        if out[0] & 0x80 == 0 {
            out.insert(0, 0xFF);
        }
        while out.len() > 1 && out[0] == 0xFF && out[1] & 0x80 != 0 {
            out.remove(0);
        }
        out
    }

    /// Java's `new BigInteger(bytes)`; `None` for no bytes (Java refuses
    /// them too).
    pub fn from_twos_complement(bytes: &[u8]) -> Option<Unscaled> {
        let first = *bytes.first()?;
        let negative = first & 0x80 != 0;
        let magnitude: Vec<u8> = if negative {
            // |x| = 2^(8n) - bytes: invert and add one.
            let mut m: Vec<u8> = bytes.iter().map(|b| !b).collect();
            for b in m.iter_mut().rev() {
                let (sum, carry) = b.overflowing_add(1);
                *b = sum;
                if !carry {
                    break;
                }
            }
            // -2^(8n-1) inverted plus one overflows into a ninth bit.
            if m.iter().all(|&b| b == 0) {
                m.insert(0, 1);
            }
            m
        } else {
            bytes.to_vec()
        };
        let digits = to_decimal(&magnitude);
        Some(Unscaled {
            negative: negative && !digits.is_empty(),
            digits,
        })
    }

    /// The decimal `self × 10^-scale` written plainly with exactly `scale`
    /// digits after the point (`1250` at scale 2 is `12.50`; at scale -2,
    /// `125000`): what a sink gets for a `Decimal`.
    pub fn plain(&self, scale: i32) -> String {
        let digits = if self.digits.is_empty() {
            "0"
        } else {
            &self.digits
        };
        let mut s = String::with_capacity(digits.len() + 3);
        if self.negative {
            s.push('-');
        }
        if scale <= 0 {
            s.push_str(digits);
            if !self.digits.is_empty() {
                s.extend(std::iter::repeat_n('0', scale.unsigned_abs() as usize));
            }
            return s;
        }
        let scale = scale as usize;
        if digits.len() <= scale {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', scale - digits.len()));
            s.push_str(digits);
        } else {
            let point = digits.len() - scale;
            s.push_str(&digits[..point]);
            s.push('.');
            s.push_str(&digits[point..]);
        }
        s
    }

    /// Java's `new BigDecimal(unscaled, scale).toString()`, what Jackson
    /// writes for `decimal.format=NUMERIC`.
    pub fn java_big_decimal(&self, scale: i32) -> String {
        let coefficient = if self.digits.is_empty() {
            "0"
        } else {
            &self.digits
        };
        let adjusted = -i64::from(scale) + coefficient.len() as i64 - 1;
        if scale >= 0 && adjusted >= -6 {
            return self.plain(scale);
        }
        let mut s = String::new();
        if self.negative {
            s.push('-');
        }
        s.push_str(&coefficient[..1]);
        if coefficient.len() > 1 {
            s.push('.');
            s.push_str(&coefficient[1..]);
        }
        s.push('E');
        if adjusted >= 0 {
            s.push('+');
        }
        s.push_str(&adjusted.to_string());
        s
    }
}

/// Decimal digits to big-endian bytes, without leading zeros.
fn to_binary(digits: &str) -> Vec<u8> {
    // Little-endian base 2^32 limbs, multiplied up nine digits at a time.
    let mut limbs: Vec<u32> = Vec::new();
    let bytes = digits.as_bytes();
    let head = bytes.len() % 9;
    let chunks = std::iter::once(&bytes[..head])
        .filter(|c| !c.is_empty())
        .chain(bytes[head..].chunks(9));
    for chunk in chunks {
        let mul = 10u64.pow(chunk.len() as u32);
        let mut carry: u64 = std::str::from_utf8(chunk)
            .expect("ASCII digits")
            .parse()
            .expect("digits");
        for limb in limbs.iter_mut() {
            let v = u64::from(*limb) * mul + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
    }
    let mut out: Vec<u8> = limbs.iter().rev().flat_map(|l| l.to_be_bytes()).collect();
    let zeros = out.iter().take_while(|&&b| b == 0).count();
    out.drain(..zeros);
    out
}

/// Big-endian bytes to decimal digits, without leading zeros.
fn to_decimal(bytes: &[u8]) -> String {
    let mut limbs: Vec<u32> = bytes
        .rchunks(4)
        .map(|c| {
            let mut b = [0u8; 4];
            b[4 - c.len()..].copy_from_slice(c);
            u32::from_be_bytes(b)
        })
        .collect();
    while limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut groups: Vec<u32> = Vec::new();
    while !limbs.is_empty() {
        let mut rem: u64 = 0;
        for limb in limbs.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*limb);
            *limb = (v / 1_000_000_000) as u32;
            rem = v % 1_000_000_000;
        }
        groups.push(rem as u32);
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
    }
    let mut s = String::new();
    for (i, g) in groups.iter().rev().enumerate() {
        if i == 0 {
            s.push_str(&g.to_string());
        } else {
            s.push_str(&format!("{g:09}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unscaled(text: &str, scale: i32) -> Unscaled {
        Decimal::parse(text).unwrap().unscaled(scale).unwrap()
    }

    #[test]
    fn two_s_complement_is_javas() {
        // (value, BigInteger.valueOf(value).toByteArray())
        for (v, bytes) in [
            ("0", &[0u8][..]),
            ("1", &[1]),
            ("127", &[0x7F]),
            ("128", &[0x00, 0x80]),
            ("255", &[0x00, 0xFF]),
            ("256", &[0x01, 0x00]),
            ("-1", &[0xFF]),
            ("-128", &[0x80]),
            ("-129", &[0xFF, 0x7F]),
            ("-256", &[0xFF, 0x00]),
            ("-32768", &[0x80, 0x00]),
            ("12345", &[0x30, 0x39]),
            ("-12345", &[0xCF, 0xC7]),
        ] {
            let u = unscaled(v, 0);
            assert_eq!(u.to_twos_complement(), bytes, "{v}");
            assert_eq!(Unscaled::from_twos_complement(bytes), Some(u), "{v}");
        }
        let big = "123456789012345678901234567890123456789";
        for v in [big.to_string(), format!("-{big}")] {
            let u = unscaled(&v, 0);
            assert_eq!(
                Unscaled::from_twos_complement(&u.to_twos_complement()),
                Some(u)
            );
        }
        assert_eq!(Unscaled::from_twos_complement(&[]), None);
    }

    #[test]
    fn scales_are_kept_exactly() {
        assert_eq!(unscaled("12.5", 2).plain(2), "12.50");
        assert_eq!(unscaled("-0.05", 2).plain(2), "-0.05");
        assert_eq!(unscaled("0", 3).plain(3), "0.000");
        assert_eq!(unscaled("1.5e3", 0).plain(0), "1500");
        assert_eq!(unscaled("500", -2).digits, "5");
        assert_eq!(unscaled("500", -2).plain(-2), "500");
        assert_eq!(unscaled("-0.0", 1).plain(1), "0.0");
        assert!(Decimal::parse("12.345").unwrap().unscaled(2).is_err());
        assert!(
            Decimal::parse("1e999999999999")
                .unwrap()
                .unscaled(0)
                .is_err()
        );
        assert_eq!(Decimal::parse("007").unwrap().to_i64(), Ok(7));
        assert_eq!(Decimal::parse("5.0").unwrap().to_i64(), Ok(5));
        assert!(Decimal::parse("5.5").unwrap().to_i64().is_err());
        assert_eq!(
            Decimal::parse("-9223372036854775808").unwrap().to_i64(),
            Ok(i64::MIN)
        );
        assert!(
            Decimal::parse("9223372036854775808")
                .unwrap()
                .to_i64()
                .is_err()
        );
    }

    #[test]
    fn numeric_decimals_are_written_as_big_decimal_to_string() {
        for (digits, scale, java) in [
            ("12345", 2, "123.45"),
            ("1", 8, "1E-8"),
            ("123", 8, "0.00000123"),
            ("123", 9, "1.23E-7"),
            ("5", -2, "5E+2"),
            ("0", 2, "0.00"),
            ("-5", 1, "-0.5"),
        ] {
            assert_eq!(unscaled(digits, 0).java_big_decimal(scale), java);
        }
    }
}
