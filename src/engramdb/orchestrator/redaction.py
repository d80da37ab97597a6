"""Redaction: what the memory orchestrator applies to everything it returns, so sensitive data
that was memorized (an e-mail address, a card number, an API key pasted into a chat) is not
handed back to an agent or a prompt verbatim.

Core types:

* ``RedactionRule`` — one kind of sensitive data: a ``name`` (the key of its count), a compiled
  ``pattern``, the ``replacement`` written in place of a match (an ``re`` template, so a rule
  can keep part of its match with ``\\g<name>``), an optional ``validator`` that must accept
  the matched text (a checksum, a digit count), and an optional ``precondition``: a cheap test
  of the whole text that proves the rule has nothing to replace in it (every default rule has
  one; see "Preconditions" below).
* ``RedactionPolicy`` — an ordered tuple of rules. ``redact(text)`` returns a ``Redacted`` (the
  new text and how many matches each rule replaced); ``redact_value(value)`` does the same for
  the strings inside lists, tuples and dict values (keys are never changed). Policies compose:
  ``without(*names)``, ``with_rules(*rules)`` and ``RedactionPolicy.none()``.
* ``default_policy()`` — the policy made of ``DEFAULT_RULES``; each default rule is also a
  module constant (``EMAIL``, ``CARD``, …) for building other policies.

Default rules, in the order they run (counts are keyed by these names):

1. ``private_key`` — PEM private key blocks (RSA, EC, OpenSSH, PKCS#8, PGP), also with
   ``\\n``-escaped newlines as in JSON credential files → ``[SECRET]``.
2. ``jwt`` — JSON Web Tokens: three base64url segments, the first starting ``eyJ``.
3. ``api_key`` — keys with a well-known prefix: ``sk-`` (OpenAI, Anthropic), ``sk_live_`` /
   ``pk_live_`` / ``rk_`` and ``whsec_`` (Stripe), ``ghp_`` ``gho_`` ``ghu_`` ``ghs_`` ``ghr_``
   and ``github_pat_`` (GitHub), ``xoxb-`` / ``xoxp-`` … (Slack), ``AKIA`` / ``ASIA`` (AWS
   access key ids), ``AIza`` (Google), ``glpat-`` (GitLab), ``hf_`` (Hugging Face), ``npm_``.
4. ``bearer`` — the token after ``Bearer`` (``Bearer [SECRET]``).
5. ``url_credentials`` — the password in ``scheme://user:password@host``.
6. ``secret_assignment`` — the value of ``password=…``, ``api_key: …``, ``"secret": "…"``,
   ``token=…``, ``DB_PASSWORD=…``, ``Authorization: Basic …`` and the like; the name is kept.
   A dict entry whose key is such a name is redacted the same way by ``redact_value``.
7. ``email`` — e-mail addresses, also inside URLs → ``[EMAIL]``.
8. ``iban`` — IBANs, spaced or not, that pass the ISO 13616 mod-97 check → ``[IBAN]``.
9. ``card`` — payment card numbers: 13–19 digits, ungrouped or in groups of 3+ digits joined by
   one kind of separator (space or dash), that pass the Luhn check and are not one digit
   repeated → ``[CARD]``.
10. ``ssn`` — US Social Security numbers: ``123-45-6789`` and ``123 45 6789`` (not the
    never-issued area numbers 000, 666 and 900–999, group 00 or serial 0000), and nine digits
    written after ``SSN`` or ``social security number`` (the label is kept) → ``[SSN]``.
11. ``passport`` — a passport number (6–9 letters and digits, at least one digit) written
    after ``passport``, ``passport number``, ``passport no.`` or ``passport #`` (and an
    ``is`` after them); the label is kept → ``passport number [PASSPORT]``.
12. ``phone`` — phone numbers with at least 7 digits: ``+CC …`` and ``00CC …`` international
    forms, North-American ``(555) 123-4567`` / ``555-123-4567`` / ``555.123.4567``, and
    European national forms with a trunk ``0`` (``020 7946 0958``, ``06 12 34 56 78``,
    ``0151-12345678``, ``(030) 1234567``) → ``[PHONE]``.

**Why this order.** Rules run one after another, each on the text the previous ones left, and
no replacement token can be matched by any rule. So an earlier rule claims its text first: a
secret's value is gone before its digits could look like a card or a phone; an e-mail address
(whose local part may be all digits) goes before cards and phones; an IBAN, whose digits may
contain a Luhn-valid run, goes before cards; and cards go before phones, whose patterns would
otherwise claim pieces of a grouped card number.

**Validated rules and longer runs.** A rule with a validator may match more than the sensitive
part: a card followed by a CVV group (``4111 1111 1111 1111 123``), an IBAN followed by
``EUR``. When the validator rejects a match, the same pattern is tried on shorter prefixes of
it that end at a word end, longest first, and then at later starts; so the card inside the
longer run is still found. A long run without separators (an order number of 20+ digits) has
no shorter candidates and is left alone, as are numbers that fail their checksum.

**What is not redacted** (each is tested): dates (``2023-05-30``, ``30.05.2023``,
``05/30/2023``), times, ISO timestamps, years, version numbers, IP addresses, prices, small
numbers, Unix timestamps, the nil UUID, and digit strings that fail the card's Luhn check. A
Luhn-valid 13–19 digit number is always treated as a card, so one in ten 13-digit millisecond
timestamps is redacted too: for a redaction layer, a false positive costs less than a leak.
Values are only recognised by their shape or by a name next to them: a password written in
prose ("my password is hunter2") is not found.

**Idempotent by construction.** A replacement can change what a neighbouring match sees (a
lookbehind that was a letter is now ``]``), so ``redact`` repeats the pass over all rules until
one changes nothing — a second pass for any text that had something to redact. Its result is a
fixpoint: redacting it again changes nothing and counts nothing.

**Preconditions.** Most texts hold nothing to redact, and a pattern scans the whole text to
find that out. So each default rule first asks a much cheaper question that a text must pass
for the rule to replace anything, derived from the rule's own pattern and validator: a literal
it needs (``@``, ``://``, ``eyJ``, ``-----BEGIN``, an API key prefix, a secret's word right
before ``=`` or ``:``, ``bearer``, ``passport``) or the ASCII digits its validator or pattern
needs (a card 13, an SSN 9, a phone 7, an IBAN 2). A text that fails is returned by that rule
as it is, so the result (text and counts) is the same as without preconditions, only sooner; a
property test compares the two. A rule built without a precondition runs on every text.

Redaction is pure and deterministic, and its time is linear in the text: every pattern starts
at a word boundary or a fixed prefix and none can backtrack without bound (adversarial inputs
are tested).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engramdb.core.errors import ValidationError
from engramdb.core.types import MemoryEntry
from engramdb.orchestrator.redaction_preconditions import (
    digits_at_least,
    holds,
    may_assign_secret,
    may_hold_api_key,
    names_with_digit,
)

__all__ = [
    "API_KEY",
    "BEARER",
    "CARD",
    "DEFAULT_RULES",
    "EMAIL",
    "IBAN",
    "JWT",
    "PASSPORT",
    "PHONE",
    "PRIVATE_KEY",
    "SECRET_ASSIGNMENT",
    "SECRET_TOKEN",
    "SSN",
    "URL_CREDENTIALS",
    "Redacted",
    "RedactionPolicy",
    "RedactionRule",
    "default_policy",
    "redact_entry",
]

SECRET_TOKEN = "[SECRET]"


@dataclass(frozen=True)
class Redacted:
    """A redacted text and how many matches each rule replaced (rules that replaced nothing
    are absent, so ``counts == {}`` means the text came back unchanged)."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """How many matches were replaced in all."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class RedactionRule:
    """One kind of sensitive data: a pattern, the replacement for its matches, and an optional
    validator that must accept the matched text for it to be replaced.

    ``replacement`` is an ``re`` template expanded against the match, so a rule can keep a part
    of it (``\\g<head>[SECRET]`` keeps the group ``head``). A match that would be replaced by
    itself (already redacted text) is neither changed nor counted.

    ``precondition``, when given, is called with the whole text before the pattern runs; it may
    return False only for a text in which the rule would replace nothing (a literal that every
    match holds is missing, or fewer digits than the validator accepts), and the rule is then
    skipped. It saves time and never changes a result; when in doubt it must return True.
    """

    name: str
    pattern: re.Pattern[str]
    replacement: str
    validator: Callable[[str], bool] | None = None
    precondition: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValidationError("a redaction rule needs a name")

    def apply(self, text: str) -> tuple[str, int]:
        """``text`` with this rule's matches replaced, and how many were replaced."""
        if self.precondition is not None and not self.precondition(text):
            return text, 0
        pieces: list[str] = []
        copied = 0  # text[:copied] is already in pieces
        position = 0  # where the next search starts
        count = 0
        while position <= len(text):
            candidate = self.pattern.search(text, position)
            if candidate is None:
                break
            match = self._accepted(text, candidate)
            if match is None:
                # Rejected here; a later start inside the candidate may still hold a match
                # (the card after a group that made the run too long).
                position = candidate.start() + 1
                continue
            replacement = match.expand(self.replacement)
            if replacement != match.group():
                pieces.append(text[copied : match.start()])
                pieces.append(replacement)
                copied = match.end()
                count += 1
            position = match.end()
        if not count:
            return text, 0
        pieces.append(text[copied:])
        return "".join(pieces), count

    def _accepted(self, text: str, candidate: re.Match[str]) -> re.Match[str] | None:
        """The match to replace: ``candidate`` itself, or the longest prefix of it that ends at
        a word end, still matches the pattern and passes the validator; None if there is none.
        Empty matches are never replaced (they would redact nothing)."""
        start, end = candidate.span()
        if start == end:
            return None
        if self.validator is None or self.validator(candidate.group()):
            return candidate
        # Only word ends are tried: the pattern cannot look past ``end`` when it is used as an
        # end position, and at a word end its own "no word character follows" checks hold.
        for cut in range(end - 1, start, -1):
            if _is_word_char(text[cut - 1]) and not _is_word_char(text[cut]):
                shorter = self.pattern.fullmatch(text, start, cut)
                if shorter is not None and self.validator(shorter.group()):
                    return shorter
        return None


def _is_word_char(char: str) -> bool:
    # The same class as the patterns' ``\w``.
    return char.isalnum() or char == "_"


# --- validators ------------------------------------------------------------------------------


def _digits(text: str) -> str:
    return "".join(char for char in text if "0" <= char <= "9")


def _luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) checksum that every payment card number carries in its last digit."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = ord(char) - ord("0")
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _is_card_number(text: str) -> bool:
    # All zeros pass Luhn (as some other repeated digits do), but one digit repeated is a
    # placeholder (0000 0000 0000 0000) or part of the nil UUID, never an issued number.
    digits = _digits(text)
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn_valid(digits)


def _is_iban(text: str) -> bool:
    """ISO 13616: move the country code and check digits to the end, read letters as 10–35,
    and the number must leave 1 when divided by 97."""
    compact = text.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _is_phone_number(text: str) -> bool:
    """Digit counts per form. The pattern fixes the North-American forms at 10 or 11 digits;
    the open-ended forms need limits: E.164 allows at most 15 digits after ``+`` (the trunk
    ``(0)`` some write after the country code is not one of them), and national numbers with
    a trunk ``0`` have 9–13, which keeps ``0800-1700`` (a time range) out."""
    digits = len(_digits(text.replace("(0)", "")))
    if text.startswith("+"):
        return 7 <= digits <= 15
    if text.startswith("00"):
        return 9 <= digits <= 17
    if text.startswith(("0", "(0")):
        return 9 <= digits <= 13
    return True


# --- the default rules -----------------------------------------------------------------------

_PRIVATE_KEY_LABEL = r"(?:[A-Z0-9]+[ ])*PRIVATE[ ]KEY(?:[ ]BLOCK)?"

PRIVATE_KEY = RedactionRule(
    "private_key",
    re.compile(
        rf"""
        -----BEGIN[ ]{_PRIVATE_KEY_LABEL}-----
        # Base64 lines, RFC 1421 headers (Proc-Type: …, DEK-Info: …), and literal \n escapes as
        # in JSON credential files. An unterminated block (a text cut short) is redacted up to
        # where its body could end; the END line is optional so that case never backtracks.
        (?:[A-Za-z0-9+/=\s\\]|[A-Za-z-]+:[^\n]*)*
        (?:-----END[ ]{_PRIVATE_KEY_LABEL}-----)?
        """,
        re.VERBOSE,
    ),
    SECRET_TOKEN,
    precondition=holds("-----BEGIN "),
)

JWT = RedactionRule(
    "jwt",
    # Header and payload are base64url JSON objects, so the header starts "eyJ" ('{"'); the
    # signature is empty for unsigned tokens.
    re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    SECRET_TOKEN,
    precondition=holds("eyJ"),
)

API_KEY = RedactionRule(
    "api_key",
    re.compile(
        r"""
        (?<![\w-])
        (?:
            sk-[A-Za-z0-9_-]{16,}                          # OpenAI, Anthropic (sk-ant-…)
          | (?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}    # Stripe secret/publishable/restricted
          | whsec_[A-Za-z0-9]{16,}                         # Stripe webhook secret
          | gh[opsur]_[A-Za-z0-9]{20,}                     # GitHub tokens
          | github_pat_[A-Za-z0-9_]{20,}                   # GitHub fine-grained tokens
          | xox[abeoprs]-[A-Za-z0-9-]{10,}                 # Slack
          | (?:AKIA|ASIA)[A-Z0-9]{16}                      # AWS access key ids
          | AIza[A-Za-z0-9_-]{35}                          # Google API keys
          | glpat-[A-Za-z0-9_-]{20,}                       # GitLab
          | hf_[A-Za-z0-9]{30,}                            # Hugging Face
          | npm_[A-Za-z0-9]{36}                            # npm
        )
        (?![\w-])
        """,
        re.VERBOSE,
    ),
    SECRET_TOKEN,
    precondition=may_hold_api_key,
)

BEARER = RedactionRule(
    "bearer",
    # "bearer" is also an English word ("the bearer of bad news"): the token must be 8+
    # characters of the token alphabet (RFC 6750) and hold a digit, as generated tokens do.
    re.compile(r"(?P<head>\b(?i:bearer)[ \t]+)(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}=*"),
    rf"\g<head>{SECRET_TOKEN}",
    precondition=names_with_digit("bearer"),
)

URL_CREDENTIALS = RedactionRule(
    "url_credentials",
    # Before ``email``: "user:password@host.com" would otherwise read as an e-mail address and
    # lose the host, while the user name alone is no secret.
    re.compile(r"(?<=://)(?P<user>[^\s/:@\[\]]+):[^\s/@]+@"),
    rf"\g<user>:{SECRET_TOKEN}@",
    precondition=lambda text: "://" in text and "@" in text,
)

# A secret's name ends with one of these words; any prefix is allowed (DB_PASSWORD,
# clientSecret, x-api-key, aws_secret_access_key) but no suffix: the separator must follow, so
# max_tokens and tokenizer are not secrets. The prefix stays in the text, so the pattern starts
# at the word.
_SECRET_WORD = r"""
    (?:password|passwd|passphrase|pwd|secret|token|credentials?|authorization
      |api[_-]?key|(?:access|secret|private|auth|client|encryption|signing|master)[_-]?key)
"""

SECRET_ASSIGNMENT = RedactionRule(
    "secret_assignment",
    re.compile(
        rf"""
        (?P<head>
            (?=[acdeimpst])  # the words' first letters: twice as fast as trying each word
            {_SECRET_WORD}
            ["']?[ \t]*(?:=>|:=|=|:)[ \t]*       # = : => := , after a quoted JSON/YAML key too
            (?:\*\*|__)?+[ \t]*                  # the end of Markdown emphasis: **Password:** x
            (?P<quote>["'])?
            # An auth scheme stays (Authorization: Basic …). Possessive, like the emphasis:
            # when the value was already redacted, "Basic" or "**" must not become the value.
            (?:(?:bearer|basic|token|digest)[ \t]+)?+
        )
        # A quoted value runs to its closing quote (passphrases have spaces); a bare one to
        # whitespace, a quote, or , ; & (the next field or URL parameter). A bare value never
        # starts a JSON object or array: "credentials": {{"user": …}} is redacted field by field.
        (?(quote)(?:(?!(?P=quote))[^\\\n]|\\.)+|[^\s"',;&{{}}\[\]]+)
        """,
        re.IGNORECASE | re.VERBOSE,
    ),
    rf"\g<head>{SECRET_TOKEN}",
    precondition=may_assign_secret,
)

EMAIL = RedactionRule(
    "email",
    # Anchored at the start of the local part, so a long word without "@" is scanned once; the
    # domain's labels are alphanumeric at both ends and its top level is letters only.
    re.compile(r"(?<![\w.%+-])[\w.%+-]+@(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+[^\W\d_]{2,63}(?!\w)"),
    "[EMAIL]",
    precondition=holds("@"),
)

IBAN = RedactionRule(
    "iban",
    re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[ ]?[A-Za-z0-9]){11,30}(?![A-Za-z0-9])"),
    "[IBAN]",
    _is_iban,
    precondition=digits_at_least(2),
)

CARD = RedactionRule(
    "card",
    # Groups of at least 3 digits (every card layout: 4-4-4-4, 4-6-5, 4-4-4-4-3), so lists of
    # small numbers never add up to a candidate; one separator kind per number, as printed; at
    # most 6 groups (19 digits). A start inside a longer run is allowed (the card after an
    # order number), but not inside a decimal (1234567890123.45 is an amount) nor after a "+"
    # (+4915112345678 is a phone number, whatever its checksum).
    re.compile(
        r"""
        (?<![\w+])(?<![0-9][.,])
        [0-9]{3,19}
        (?:(?P<sep>[ -])[0-9]{3,19}(?:(?P=sep)[0-9]{3,19}){0,4})?
        (?!\w)(?![.,][0-9])
        """,
        re.VERBOSE,
    ),
    "[CARD]",
    _is_card_number,
    precondition=digits_at_least(13),
)

SSN = RedactionRule(
    "ssn",
    re.compile(
        r"""
        (?<![\w-])
        (?:
            # Area, group and serial with one kind of separator; the Social Security
            # Administration never issues area 000, 666 or 9xx, group 00 or serial 0000.
            (?!000|666|9)[0-9]{3}(?P<sep>[ -])(?!00)[0-9]{2}(?P=sep)(?!0000)[0-9]{4}
            # Nine digits in a row are only an SSN when the text says so.
          | (?P<head>(?i:ssn|social[ ]security(?:[ ](?:number|no\.?))?)[ \t]*[:#]?[ \t]*)
            (?!000|666|9)[0-9]{9}
        )
        (?![\w-])
        """,
        re.VERBOSE,
    ),
    r"\g<head>[SSN]",
    precondition=digits_at_least(9),
)

PASSPORT = RedactionRule(
    "passport",
    # Passport numbers have no shape of their own (6-9 letters and digits, by country), so
    # only one named as such is redacted; it must hold a digit, so words ("passport is
    # expired") are not taken for numbers.
    re.compile(
        r"""
        (?P<head>
            \b(?i:passport)
            (?:[ \t]+(?i:number|no\.?|nr\.?|num|id)|[ \t]*\#)?
            (?:[ \t]+(?i:is|was|reads))?
            [ \t]*:?[ \t]*
        )
        (?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,9}
        (?![\w-])
        """,
        re.VERBOSE,
    ),
    r"\g<head>[PASSPORT]",
    precondition=names_with_digit("passport"),
)

PHONE = RedactionRule(
    "phone",
    re.compile(
        r"""
        # Not inside a word, after a "+", or continuing a number written with . - / (which
        # keeps 2023-05-30 and 10.0.0.1 out).
        (?<![\w+])(?<![0-9][./-])
        (?:
            # +CC: a country code and groups, with an optional trunk "(0)" or "(area)".
            \+[0-9]+(?:(?:[ .-]|[ ]?\([0-9]{1,4}\)[ ]?)[0-9]+){0,6}
            # 00CC: only when grouped, so zero-padded numbers are not phones; no country code
            # starts with 0.
          | 00[1-9][0-9]{0,2}(?:(?:[ -]|[ ]?\([0-9]{1,4}\)[ ]?)[0-9]+){1,6}
            # North America: (555) 123-4567, 555-123-4567, 555.123.4567, 1-555-123-4567.
          | (?:1[ .-]?)?(?:\([0-9]{3}\)[ ]?|[0-9]{3}[ .-])[0-9]{3}[ .-][0-9]{4}
            # France: five pairs with one separator (a date never has five parts).
          | 0[1-9](?:[ ][0-9]{2}){4} | 0[1-9](?:\.[0-9]{2}){4} | 0[1-9](?:-[0-9]{2}){4}
            # Trunk-0 national numbers: 020 7946 0958, 0151-12345678, (030) 1234567,
            # 030/1234567. No area code starts with 0 (0000 0000 is a placeholder), and the
            # group after it has 3+ digits, unlike a date's day (05-30-2023).
          | (?:\(0[1-9][0-9]{0,3}\)[ ]?|0[1-9][0-9]{0,3}[ /-])[0-9]{3,8}(?:[ -][0-9]{2,8}){0,3}
        )
        (?!\w)(?![.-]?[0-9])
        """,
        re.VERBOSE,
    ),
    "[PHONE]",
    _is_phone_number,
    precondition=digits_at_least(7),
)

DEFAULT_RULES: tuple[RedactionRule, ...] = (
    PRIVATE_KEY,
    JWT,
    API_KEY,
    BEARER,
    URL_CREDENTIALS,
    SECRET_ASSIGNMENT,
    EMAIL,
    IBAN,
    SSN,
    PASSPORT,
    CARD,
    PHONE,
)

# The same names as dict keys (``redact_value``): the whole key must be one.
_SECRET_KEY = re.compile(rf"[\w.-]*?{_SECRET_WORD}", re.IGNORECASE | re.VERBOSE)

# Passes over the rules until one changes nothing (see ``RedactionPolicy.redact``). The default
# rules settle in two, rarely three; the cap only stops a custom rule whose replacement
# recreates its own match from looping.
_MAX_PASSES = 8


# --- policies --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RedactionPolicy:
    """An ordered set of redaction rules; the default policy redacts everything listed in this
    module's docstring. Rule names are unique: they key the counts and name rules to drop."""

    rules: tuple[RedactionRule, ...] = DEFAULT_RULES

    def __post_init__(self) -> None:
        # Accept any iterable of rules but keep the policy immutable and hashable.
        object.__setattr__(self, "rules", tuple(self.rules))
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValidationError(f"two redaction rules are named {rule.name!r}")
            seen.add(rule.name)

    @classmethod
    def none(cls) -> RedactionPolicy:
        """A policy that changes nothing."""
        return cls(rules=())

    @property
    def names(self) -> tuple[str, ...]:
        """The rule names, in the order the rules run."""
        return tuple(rule.name for rule in self.rules)

    def without(self, *names: str) -> RedactionPolicy:
        """This policy without the named rules. An unknown name is an error: a typo would
        otherwise leave redacted what the caller meant to let through, silently."""
        unknown = sorted(set(names) - set(self.names))
        if unknown:
            raise ValidationError(
                f"no redaction rule named {', '.join(map(repr, unknown))}",
                unknown=unknown,
                known=list(self.names),
            )
        return RedactionPolicy(tuple(rule for rule in self.rules if rule.name not in names))

    def with_rules(self, *rules: RedactionRule) -> RedactionPolicy:
        """This policy with ``rules`` added: a rule named like an existing one replaces it in
        place (keeping its position in the order); new rules run after the existing ones."""
        added = {rule.name: rule for rule in rules}
        if len(added) != len(rules):
            raise ValidationError("rules added to a redaction policy need distinct names")
        kept = tuple(added.pop(rule.name, rule) for rule in self.rules)
        return RedactionPolicy(kept + tuple(added.values()))

    def redact(self, text: str) -> Redacted:
        """``text`` with every rule applied in order, and the counts of what was replaced."""
        counts: dict[str, int] = {}
        for _ in range(_MAX_PASSES):
            changed = False
            for rule in self.rules:
                text, count = rule.apply(text)
                if count:
                    counts[rule.name] = counts.get(rule.name, 0) + count
                    changed = True
            if not changed:
                break
        return Redacted(text, counts)

    def redact_value(self, value: Any) -> tuple[Any, dict[str, int]]:
        """``value`` with every string inside it redacted — in lists, tuples and mapping
        values, at any depth — and the summed counts. Dict keys are never changed, and other values
        (numbers, None, objects) are returned as they are, except under a secret's name: a
        dict entry such as ``{"password": "hunter2"}`` is an assignment, redacted whole to
        ``[SECRET]`` (and counted) while the ``secret_assignment`` rule is in the policy."""
        counts: Counter[str] = Counter()
        secret_keys = SECRET_ASSIGNMENT.name in self.names
        redacted = self._redact_any(value, counts, secret_keys=secret_keys)
        return redacted, dict(counts)

    def _redact_any(self, value: Any, counts: Counter[str], *, secret_keys: bool) -> Any:
        if isinstance(value, str):
            result = self.redact(value)
            counts.update(result.counts)
            return result.text
        if isinstance(value, Mapping):  # any mapping comes back as a plain dict
            return {
                key: self._redact_entry(key, item, counts, secret_keys=secret_keys)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            items = [self._redact_any(item, counts, secret_keys=secret_keys) for item in value]
            return items if isinstance(value, list) else tuple(items)
        return value

    def _redact_entry(self, key: Any, item: Any, counts: Counter[str], *, secret_keys: bool) -> Any:
        is_scalar_secret = (
            isinstance(item, str | int | float) and not isinstance(item, bool) and item != ""
        )
        if (
            secret_keys
            and is_scalar_secret
            and item != SECRET_TOKEN
            and isinstance(key, str)
            and _SECRET_KEY.fullmatch(key)
        ):
            counts[SECRET_ASSIGNMENT.name] += 1
            return SECRET_TOKEN
        return self._redact_any(item, counts, secret_keys=secret_keys)


_DEFAULT_POLICY = RedactionPolicy()


def default_policy() -> RedactionPolicy:
    """The policy of ``DEFAULT_RULES`` (immutable, so one instance is shared)."""
    return _DEFAULT_POLICY


def redact_entry(policy: RedactionPolicy, entry: MemoryEntry) -> MemoryEntry:
    """``entry`` with the strings in its value and metadata redacted by ``policy`` (keys,
    times and the rest unchanged); the same object when nothing was redacted."""
    value, value_counts = policy.redact_value(entry.value)
    metadata, metadata_counts = policy.redact_value(entry.metadata)
    if not value_counts and not metadata_counts:
        return entry
    return entry.model_copy(update={"value": value, "metadata": metadata})
