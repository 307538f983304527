"""Stored text shown as text: nothing read from the results database is interpreted as Markdown or HTML.

A method name, model, error message, code version or command is whatever some `bench` invocation (or anyone who
can write the database) put there. Streamlit renders Markdown (links, images, LaTeX, colour directives) in
`st.markdown`, captions, headers, alerts, `st.table` cells and widget labels, so a stored `![](http://host/i.png)`
would fetch an external image (a tracking beacon) and `[x](http://evil)` would become a link. The views therefore
put stored strings only into elements that show text literally (`st.text`, `st.code`, `st.dataframe`, chart
data, widget options), and where a sentence must mix them with Markdown, pass them through `literal` first:
captions, headers, alerts, and the column help that a table header shows as a tooltip (`show_table(help_text=)`),
which renders Markdown too. `literal` is the one function a stored string goes through on its way into Markdown;
tests/test_leaderboard_beacon.py plants HTML, scripts and Markdown images and links in every stored name and text,
opens every view in Chromium, hovers every header and opens every selector, and asserts no request reaches a
beacon server.
"""

from __future__ import annotations

import re

# Every ASCII punctuation character may be backslash-escaped in CommonMark (and GFM), and an escaped character is
# always literal: no link, image, emphasis, code span, autolink, HTML, table pipe, LaTeX `$` or `:colour[...]`
# directive can start from it.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")


# Streamlit's Markdown (remark-gfm) also turns bare URLs and e-mail addresses into links, and it does so on the text
# after escapes are resolved, so escaping cannot stop it: a zero-width space after "http"/"https"/"www" and before
# "@" breaks GFM's autolink patterns while the text shows the same.
_AUTOLINK = re.compile(r"(?i)\b(https?|www|mailto|xmpp)(?=\\[:.])|(?=\\@)")  # on the escaped text: ':', '.', '@' are escaped
ZERO_WIDTH = "\u200b"


def literal(value: object) -> str:
    """`value` as Markdown source that renders exactly as its text, on one line, with no link."""
    text = _LINE_BREAKS.sub(" ", "" if value is None else str(value))
    return _AUTOLINK.sub(lambda m: (m.group(1) or "") + ZERO_WIDTH, _PUNCTUATION.sub(r"\\\1", text))
