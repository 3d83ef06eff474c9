"""A bundled, realistic sample of Doughnut notes for demos and tests.

Contract:

* ``sample_notes()`` returns the same list on every call: no ``random``, no clock.
  Anything that looks random is derived from ``hashlib.blake2b`` over a string.
* Ids run 1..N without gaps, in list order. Every ``parent_id`` names a note that
  appears earlier, so rows can be inserted in list order with foreign keys on.
  Every ``target_note_id`` names an existing note (in practice always an earlier one).
* Three notebooks (ids 1..3), each with exactly one head note (``parent_id is None``).
* A note with ``target_note_id`` set is a *link note*: its parent is the subject,
  its title is the predicate and starts with ``":"``.
* ``created_at`` and ``deleted_at`` are naive datetimes meaning UTC, in whole seconds,
  between 2021-01-01 and 2026-06-30. A deleted note's descendants are deleted at the
  same moment, so no live note has a deleted parent, and live links target live notes.
* ``sibling_order`` imitates Doughnut: epoch milliseconds x 1000 for appended notes,
  midpoints for notes inserted between siblings, a few negative values and one tie.

The data deliberately contains edge cases: a parent with about sixty children, a hub
note with many inbound links, a link to a link, a link with children, long CJK details,
emoji (ZWJ sequences, flags, skin tones), right-to-left text, empty details, and
details of 149, 150 and 151 UTF-8 bytes (one CJK text has byte 150 inside a character).
``SAMPLE_FOCUS_IDS`` at the bottom names a few interesting ids.
"""


import datetime as dt
import hashlib
from collections import Counter
from functools import cache
from typing import NamedTuple


class SampleNote(NamedTuple):
    id: int  # 1..N, unique
    parent_id: int | None  # None only for notebook head notes
    target_note_id: int | None  # non-None => a "link note"
    sibling_order: int  # order among children of one parent (ascending; ties by id)
    title: str  # Doughnut column topic_constructor, max 150 chars
    details: str | None  # markdown, may be None or ""
    created_at: dt.datetime  # naive datetime meaning UTC, whole seconds
    deleted_at: dt.datetime | None  # soft-delete timestamp, None when live
    notebook_id: int


_EPOCH = dt.datetime(1970, 1, 1)
_FIRST_MOMENT = dt.datetime(2021, 1, 1)
_LAST_MOMENT = dt.datetime(2026, 6, 30, 23, 59, 59)
_SECOND = dt.timedelta(seconds=1)
_DAY_SECONDS = 86_400

# ---------------------------------------------------------------------------
# Outlines: two spaces of indentation per level. "Title @marker :: details".
# Markers: neg (negative sibling_order), between (midpoint of the two highest
# sibling orders so far), tie (same order as the previous sibling), deleted
# (soft-delete this note and its whole subtree). "¶" in details is a newline,
# and "Title ::" with nothing after it gives empty details.
# ---------------------------------------------------------------------------

_JAPANESE = """\
Japanese grammar :: 日本語文法のノート。JLPT N2 合格を目指して 📚🇯🇵
  Particles（助詞）
    は vs が
      Topic marker は :: 「〜について言えば」。既に話題になっているものに付く。
      Subject marker が
        が in subordinate clauses :: 例：私が作ったケーキ。従属節の主語は「が」。
        Exhaustive-listing が :: 「田中さんが行きます」＝ほかの人ではなく田中さん。
      Contrastive は :: 例：肉は食べるが、魚は食べない。
    を
      を with motion verbs（道を歩く） :: 通過点の「を」：橋を渡る、角を曲がる、空を飛ぶ。
    に
      に for time :: 三時に起きる。¶ただし「今日」「明日」には付かない。
      に for destination
      に for indirect object ::
      に for location of existence @between :: 例：机の上に本がある。
    で
      で for location of action
      で for means :: バスで行く、日本語で話す、ペンで書く。
    へ @neg :: 方向を示す。発音は「え」。
    と
      と as "and" (exhaustive)
      と for quotation :: 「行く」と言った。
    Sentence-ending particles（終助詞）
      よ :: 聞き手が知らない情報を伝える。
      ね :: 同意を求める・確認する。
      よね @tie
      かな
  Verb conjugation（活用）
    Verb groups
      Godan verbs（五段動詞）
      Ichidan verbs（一段動詞） :: 食べる、見る、起きる……「る」を取って活用する。
      Irregular verbs（する・来る）
    て-form（て形）
      Euphonic changes（音便）
        い音便 :: 書く → 書いて、泳ぐ → 泳いで
        促音便 :: 待つ → 待って、取る → 取って、買う → 買って
        撥音便 :: 死ぬ → 死んで、遊ぶ → 遊んで、読む → 読んで
        行く → 行って (exception)
    た-form（た形）
    Potential form（可能形）
      ら抜き言葉 :: 見られる → 見れる。話し言葉では普通だが、試験では避ける。
      ら抜き言葉 (duplicate) @deleted
    Passive（受身形）
      Suffering passive（迷惑の受身） :: 雨に降られた。隣の人に騒がれた。
    Causative（使役形）
      Causative-passive（使役受身）
  Conditionals（条件表現）
    〜ば
    〜たら
    〜と
    〜なら
    Choosing between ば／たら／と／なら @neg
  Keigo（敬語）
    Sonkeigo（尊敬語）
      お〜になる :: 例：社長がお帰りになりました。
      Special sonkeigo verbs :: いらっしゃる、召し上がる、おっしゃる、ご覧になる
    Kenjougo（謙譲語）
      お〜する :: 例：お荷物をお持ちします。
      Special kenjougo verbs :: 参る、いただく、申す、拝見する
    Bikago（美化語） :: お茶、ご飯、お水。
  Aspect（アスペクト）
    〜ている
      Progressive 〜ている :: 今、雨が降っている。
      Resultative 〜ている :: 窓が開いている。
    〜てある
    〜てしまう / 〜ちゃう
  JLPT N2 grammar points :: 文型リスト。各ノートに意味・接続・例文。
    〜たところで（逆接）
    〜にもかかわらず
    〜ものの
    〜ながらも :: 狭いながらも楽しい我が家。
    〜つつ（も）
    〜くせに :: 非難の気持ち。知っているくせに教えてくれない。
    〜わりに（は）
    〜にしては
    〜としても
    〜にしても
    〜からといって :: 高いからといって、美味しいとは限らない。
    〜どころか
    〜ばかりか
    〜はもちろん
    〜はともかく
    〜をはじめ（として）
    〜に限らず
    〜のみならず
    〜上に
    〜に加えて
    〜に対して
    〜をめぐって
    〜に基づいて
    〜をもとに（して）
    〜に沿って
    〜に応じて @between
    〜に従って
    〜につれて
    〜とともに
    〜に伴って
    〜次第
    〜上で
    〜うちに :: 若いうちに、いろいろな国へ行っておきたい。
    〜最中に
    〜際（に）
    〜たとたん（に）
    〜か〜ないかのうちに
    〜たびに
    〜ついでに
    〜あげく
    〜末に
    〜っぱなし :: 電気をつけっぱなしで寝てしまった。
    〜がち
    〜気味
    〜かねない
    〜かねる :: 申し訳ございませんが、そのご要望にはお応えしかねます。
    〜わけがない
    〜わけではない
      〜というわけではない
    〜わけにはいかない
    〜ざるを得ない
    〜ずにはいられない
    〜てならない
    〜てたまらない
    〜に違いない
    〜おそれがある :: 台風が上陸するおそれがある。
    〜だけあって
    〜だけに
    〜からには
    〜以上（は）
    〜上は
  Vocabulary notes（語彙）
    だし（出汁）
    うま味 :: 第五の味覚。昆布のグルタミン酸、かつお節のイノシン酸。
    Onomatopoeia（擬音語・擬態語）
      ぺこぺこ :: お腹がぺこぺこだ。
      ぐつぐつ :: 鍋がぐつぐつ煮えている。
      さくさく :: さくさくの天ぷら。
"""

_SOFTWARE = """\
Software architecture :: How systems are shaped, and why. 👩‍💻👨🏽‍💻
  Architectural styles
    Layered architecture
      Hexagonal architecture (ports and adapters)
        Ports :: Interfaces owned by the domain.
        Adapters
          Driving adapters :: REST controllers, CLI commands, message consumers.
          Driven adapters :: Repositories, HTTP clients, message publishers.
      Onion architecture
      Clean architecture :: Dependencies point inwards. Entities know nothing of frameworks.
    Microservices
      Service boundaries
      API gateway
      Service mesh
      Database per service
    Modular monolith @neg :: Start here. Split later, along boundaries you have proven.
    Event-driven architecture
      Event notification
      Event sourcing
        Event store
        Snapshots
        Projections
          Read models
        Upcasting events @between :: Transform old event versions while reading the stream.
      CQRS
  Distributed systems patterns
    Saga pattern
      Choreography-based saga
      Orchestration-based saga
      Compensating transactions
    Two-phase commit
    Outbox pattern
      Transactional outbox
      Polling publisher
    Idempotency
      Idempotency keys
      Exactly-once delivery (myth)
    Circuit breaker
    Retry with exponential backoff
      Jitter
    Leader election
    Consensus
      Raft
        Log replication
        Leader election in Raft
      Paxos ::
    CAP theorem
      PACELC :: If Partitioned: Availability vs Consistency, Else: Latency vs Consistency.
  Data management
    Caching
      Cache-aside
      Write-through cache
      Cache stampede
        Request coalescing
      Cache invalidation
    Sharding
      Consistent hashing
    Replication
      Read replicas
      Replication lag
    Materialized views
  Domain-driven design
    Bounded context
      Context map
      Anti-corruption layer
    Aggregate
      Aggregate root
    Ubiquitous language
    Domain events
  Architecture decision records
    ADR-007: Adopt Redis for context snapshots
    ADR-012: Precompute LLM context snapshots in a background worker instead of \
assembling them on the request path (supersedes ADR-007)
  Observability
    Structured logging
    Distributed tracing
      Trace context propagation
    Metrics
      RED method :: Rate, Errors, Duration: per service.
      USE method :: Utilization, Saturation, Errors: per resource.
  Old microservices draft @deleted
    Draft: service list
      Billing service
      Notification service
        Email templates
      Payment service
    Draft: migration plan
"""

_COOKING = """\
World cuisine :: Recipes, techniques and pantry notes 🍩🍜🍝
  Japanese cuisine
    Dashi stock
      Kombu
      Katsuobushi
      Niboshi :: Dried baby sardines. Remove heads and guts to avoid bitterness.
      Shiitake dashi :: Cold-soak dried shiitake overnight in the fridge.
      Awase dashi
    Miso soup
    Ramen
      Shoyu ramen
      Ramen tare
    Udon
      Kake udon
    Soba
      Soba tsuyu
    Oden
    Chawanmushi
    Tamagoyaki
      Dashimaki tamago
    Nikujaga
    Agedashi tofu
    Takoyaki
    Okonomiyaki
      Hiroshima-style okonomiyaki
    Sushi rice (shari) :: Rice vinegar, sugar, salt. Fold, don't stir.
  Chinese cuisine
    Mapo tofu
    Sichuan peppercorn
    Chinese master stock (lu shui)
    Wok hei :: 鑊氣: the "breath of the wok".
  Italian cuisine
    Risotto
      Risotto alla milanese
    Pasta
      Cacio e pepe
      Carbonara
      Pasta water emulsion
    Brodo
    Untitled @deleted ::
  Middle Eastern cuisine
    Hummus
    Falafel
    Shakshuka
    Za'atar
  French techniques
    Mise en place
    Mother sauces
      Béchamel
      Velouté
      Hollandaise
      Sauce tomate @between
    Fond blanc (white stock)
    Consommé
  Techniques
    Emulsification
    Maillard reaction
    Sous vide
  Pantry
    Soy sauce
    Mirin
    Sake (cooking)
    Miso
      Shiro miso
      Aka miso
  Desserts
    Doughnuts
      Yeast-raised doughnuts
      Cake doughnuts
      Mochi doughnuts (pon de ring)
    Mochi
"""

# ---------------------------------------------------------------------------
# Details that are too long, too precise, or too colourful for the outlines.
# They take precedence over inline details.
# ---------------------------------------------------------------------------

_WA_GA = """\
「は」と「が」の使い分けは、日本語学習者にとって最も難しい問題の一つです。

## 基本

- 「は」は**主題（トピック）**を示し、「〜について言えば」という意味を持つ。
- 「が」は**主語**を示し、新しい情報や、答えの焦点になる部分に付く。

## 例文

1. 私は学生です。（私について言えば、学生だ）
2. 誰が来ましたか。——田中さんが来ました。（答えの焦点）
3. 象は鼻が長い。（主題は「象」、主語は「鼻」）
4. 雨が降っている。（目の前の出来事をそのまま描写する）

## 覚え方

疑問詞（誰・何・どこ）の後には必ず「が」を使い、「は」は使わない。
また、従属節の中では主語に「が」を使うのが普通である：「私が作ったケーキは美味しい」。
一方、対比を表すときは「は」を使う：「肉は食べるが、魚は食べない」。
どちらも文法的に正しい場合でも、話し手が何を伝えたいかによって自然さが変わるので、
たくさんの例文に触れて感覚を身につけることが大切だ。

参考：三上章『象は鼻が長い』（1960）、野田尚史『「は」と「が」』（1996）。"""

_TA_TOKORODE = """\
**意味**：たとえ〜しても（期待される結果にはならない）。後ろには否定的・消極的な表現が来る。

**接続**：動詞た形 ＋ ところで

## 例文

- 今から急いだところで、終電には間に合わないだろう。
- いくら説明したところで、彼は納得しないと思う。
- 一人で悩んだところで、問題は解決しない。誰かに相談しよう。
- 謝ったところで、壊れた花瓶は元に戻らない。
- 高いお金を払ったところで、品質が良いとは限らない。

## 注意

「〜たところで」には時間的な意味（「駅に着いたところで雨が降り出した」）もあるので、
文脈で区別する必要がある。逆接の場合は「いくら」「どんなに」「たとえ」などの副詞と
一緒に使われることが多く、話し手の諦めや無力感を表す。

似ている表現：「〜ても」「〜としても」「〜にしても」。ただし「〜たところで」は、
結果が無意味・無駄であるという話し手の評価がより強い。

よくある間違い：✗「勉強したところで、合格した。」（後件が肯定的な結果なので不自然）"""

_CONDITIONALS = """\
四つの条件表現の違いを整理するためのメモ。

| 形 | 主な用法 | 後件の制限 |
|---|---|---|
| 〜ば | 一般的な条件、仮定 | 前件が動作なら、後件に意志・命令は使いにくい |
| 〜たら | 個別の一回の条件、発見 | 制限が最も少ない。話し言葉で万能 |
| 〜と | 自然の法則、習慣、発見 | 後件に意志・命令・依頼は使えない |
| 〜なら | 相手の発言を受けた仮定、助言 | 前件と後件の時間関係が逆でもよい |

## 例文

- 春になれば、桜が咲く。／春になると、桜が咲く。（どちらも自然）
- 駅に着いたら、電話してください。（✗駅に着くと、電話してください）
- 京都に行くなら、新幹線が便利ですよ。（助言）
- 窓を開けると、富士山が見えた。（発見）

迷ったら「たら」を使うのが一番安全だが、書き言葉や規則の説明では
「ば」や「と」の方が自然に聞こえることが多い。特に「〜と」は、機械の操作説明
（「このボタンを押すと、電源が入ります」）でよく使われる。
「なら」は、聞き手が話題にしたことを受けて、話し手の判断や勧めを述べるときに使う。
例えば、友達が「来週、北海道に行くんだ」と言ったら、
「北海道に行くなら、ジンギスカンを食べてみて」と答えられる。"""

_ONBIN = """\
五段動詞の「て形」「た形」を作るとき、発音しやすくするために語尾の音が変化する。
これを**音便**という。

- **い音便**：書く → 書いて、泳ぐ → 泳いで（「ぐ」の場合は「で」になる）
- **促音便**：待つ → 待って、取る → 取って、買う → 買って（小さい「っ」が入る）
- **撥音便**：死ぬ → 死んで、遊ぶ → 遊んで、読む → 読んで（「て」が「で」に濁る）
- 音便なし：話す → 話して

覚え歌（「て形の歌」）：「う・つ・る → って、む・ぶ・ぬ → んで、く → いて、
ぐ → いで、す → して」。メロディーに乗せて何度も歌うと、自然に口から出てくる。

例外は「行く」だけで、「行いて」ではなく「行って」になる。また、「問う」「請う」の
ように、「問うて」「請うて」という古い形（ウ音便）が残っている動詞もある。
関西方言では「買うて（こうて）」という形も聞かれる。

一段動詞（食べる → 食べて）や不規則動詞（する → して、来る → 来て）には
音便は起こらない。"""

_DASHI_WORD = """\
**だし**（出汁）は、昆布やかつお節、煮干し、干し椎茸などから旨味を引き出した液体で、
和食の味の土台となる。

## 関連語彙

- だしを取る（to make dashi）
- 一番だし・二番だし
- 合わせだし（昆布＋かつお節）
- だしが効いている（the dashi flavour comes through）
- 顆粒だし・だしパック

## 例文

- 母は毎朝、昆布とかつお節でだしを取っている。
- このお吸い物は、だしがよく効いていて美味しい。
- 忙しい日は、だしパックを使えば十分だ。

「出汁」と漢字で書くこともあるが、ひらがなで「だし」と書くことが多い。
料理の世界では、だしの質が料理全体の出来を左右すると言われ、
老舗の料亭ではだしの取り方が代々受け継がれている。
地域によっても好みが異なり、関東ではかつお節、関西では昆布のだしが好まれる傾向がある。
また、比喩的に「人をだしにする」（自分の目的のために利用する）という表現もある。"""

_MAPO = """\
## 麻婆豆腐（四川风味）🌶️

麻婆豆腐是一道经典的川菜，讲究“麻、辣、烫、香、酥、嫩、鲜、活”八个字。

**材料**（两人份）：嫩豆腐一块（约四百克）、牛肉末一百克、郫县豆瓣酱两大勺、
豆豉一小勺、辣椒面一小勺、花椒粉适量、蒜末、姜末、蒜苗、高汤两百毫升、水淀粉。

**做法**：

1. 豆腐切成两厘米见方的小块，放入加了盐的开水中焯一下，去掉豆腥味，捞出备用。
2. 锅中放油，小火把牛肉末炒到酥香出油。
3. 加入豆瓣酱和豆豉，炒出红油，再放入姜蒜末和辣椒面炒香。
4. 倒入高汤，烧开后轻轻放入豆腐，用锅铲背推动，不要翻炒，以免豆腐碎掉。
5. 小火煮五分钟，让豆腐充分入味。
6. 分三次淋入水淀粉勾芡，使汤汁紧紧包裹住豆腐。
7. 撒上蒜苗，出锅后再撒一层现磨的花椒粉。

小贴士：花椒粉一定要最后放，并且最好是现炒现磨的，这样麻味才够足。
如果不吃牛肉，也可以换成猪肉末；素食版本可以用香菇丁代替。"""

_DOUGHNUTS = """\
# Doughnuts 🍩

The app is named after these! 🍩🍩🍩

- **Yeast-raised**: light and airy, proofed twice.
- **Cake**: dense and crumbly, chemically leavened.
- **Mochi** (🇯🇵 ポン・デ・リング): chewy, made with tapioca or glutinous rice flour.

Fry at 175 °C, turn once. Best eaten the same day 👩🏾‍🍳👍🏽"""

_STRUCTURED_LOGGING = """\
Log events as JSON, not prose 👩‍💻

```json
{"level": "info", "msg": "order placed", "order_id": 42, "trace_id": "4bf92f35"}
```

Always include `trace_id` and `span_id` so logs join up with traces."""

_SHAKSHUKA = """\
🍳🌶️ Eggs poached in a spiced tomato and pepper sauce.

Hebrew: שקשוקה · Arabic: شكشوكة · popular in 🇹🇳 🇱🇾 🇮🇱

Finish with feta, parsley and a pinch of za'atar. 👍🏿"""

_DETAILS: dict[str, str] = {
    "は vs が": _WA_GA,
    "〜たところで（逆接）": _TA_TOKORODE,
    "Choosing between ば／たら／と／なら": _CONDITIONALS,
    "Euphonic changes（音便）": _ONBIN,
    "だし（出汁）": _DASHI_WORD,
    "Mapo tofu": _MAPO,
    "Doughnuts": _DOUGHNUTS,
    "Structured logging": _STRUCTURED_LOGGING,
    "Shakshuka": _SHAKSHUKA,
    # 149, 150 and 151 bytes of ASCII.
    "Cache-aside": (
        "Read: check the cache; on a miss, load from the database and populate "
        "the cache. Write: update the database first, then evict the cached key at once."
    ),
    "Write-through cache": (
        "Every write goes to the cache and the database in the same operation. "
        "Reads are always warm, but write latency pays for both stores. Simple and sound."
    ),
    "Cache invalidation": (
        "There are only two hard things in computer science: cache invalidation "
        "and naming things. (Phil Karlton) Prefer short TTLs plus explicit evictions too."
    ),
    # 158 bytes, mostly CJK: byte 150 falls inside a three-byte character.
    "〜にもかかわらず": (
        "N2。意味：〜のに。予想や期待に反する結果を表す、やや硬い表現。"
        "例：雨にもかかわらず、大勢の観客が集まった。"
    ),
    # Exactly 150 bytes: fifty three-byte characters.
    "〜ものの": (
        "意味：〜けれども。前のことは認めるが、後ろは期待と違う。"
        "例：服を買ったものの、まだ一度も着ていない。"
    ),
    # 153 bytes: byte 150 falls inside the final four-byte emoji.
    "Mochi doughnuts (pon de ring)": (
        "Mister Donut's pon de ring: eight little mochi balls joined in a ring, "
        "made with tapioca flour. Chewy, not fluffy. Glaze: sugar, honey or matcha 🍵🍩"
    ),
    "Carbonara": "🇮🇹 Guanciale, pecorino romano, egg yolks, black pepper. **No cream.** 🙅🏻‍♂️",
    "Exactly-once delivery (myth)": (
        "🙃 There is no exactly-once *delivery*, only at-least-once delivery "
        "plus idempotent processing."
    ),
    "ADR-007: Adopt Redis for context snapshots": (
        "**Status:** ✅ Accepted (2023-04)\n\n"
        "**Context:** the API recomputed context on every request.\n\n"
        "**Decision:** store snapshots in Redis keyed by note id.\n\n"
        "**Consequences:** staleness must be bounded by a refresh job."
    ),
    "Hummus": (
        "**Hummus** (Arabic: حُمُّص, Hebrew: חומוס): chickpeas, tahini (طحينة), "
        "lemon, garlic. Peel the chickpeas for a silky texture. 🇱🇧"
    ),
    "Falafel": (
        "فلافل / פלאפל: soaked, *never* canned, chickpeas (or fava beans in 🇪🇬). Fry at 180 °C."
    ),
    "Za'atar": "زعتر: thyme, sumac, toasted sesame, salt. Also the name of the herb itself.",
    "Mise en place": "👨🏿‍🍳 Everything in its place before the heat goes on.",
    "Sous vide": "🌡️ 63 °C for 45 minutes: onsen-style eggs.",
    "Kombu": "昆布. Wipe, don't wash: the white powder is umami (mannitol and glutamate).",
    "Katsuobushi": "鰹節. Add at 85 °C, steep for two minutes, strain without squeezing.",
    "Dashi stock": (
        "The base of Japanese cooking 🇯🇵.\n\n"
        "1. Soak 10 g kombu in 1 l water for 30 minutes.\n"
        "2. Heat slowly; remove the kombu just before the boil.\n"
        "3. Add 20 g katsuobushi, steep 2 minutes, strain.\n\n"
        "See the vocabulary note だし（出汁） for the Japanese side."
    ),
    "Event sourcing": (
        "Persist state as an append-only sequence of domain events; current state "
        "is a left fold over the stream.\n\n"
        "- ✅ Full audit trail, temporal queries\n"
        "- ⚠️ Schema evolution (see *Upcasting events*)\n"
        "- ⚠️ Eventual consistency of projections"
    ),
    "Saga pattern": (
        "A sequence of local transactions; each step publishes an event or command "
        "that triggers the next. Failures run compensating transactions in reverse."
    ),
}

# ---------------------------------------------------------------------------
# Links, and notes hanging under links, added after the outlines in this order.
# Subject and target name a title from an outline or the key of an earlier link.
# ---------------------------------------------------------------------------


class _LinkSpec(NamedTuple):
    subject: str
    predicate: str
    target: str
    details: str | None = None
    key: str | None = None
    marker: str = ""


class _ChildSpec(NamedTuple):
    parent: str
    title: str
    details: str | None = None


_L = _LinkSpec

_EXTRAS: tuple[_LinkSpec | _ChildSpec, ...] = (
    # The hub: Dashi stock.
    _L("Miso soup", ":using", "Dashi stock"),
    _L("Kake udon", ":using", "Dashi stock"),
    _L("Soba tsuyu", ":using", "Dashi stock", "Dashi 4 : soy sauce 1 : mirin 1 for dipping."),
    _L("Oden", ":using", "Dashi stock"),
    _L("Chawanmushi", ":using", "Dashi stock", "Egg 1 : dashi 3 by volume."),
    _L("Dashimaki tamago", ":using", "Dashi stock"),
    _L("Nikujaga", ":using", "Dashi stock"),
    _L("Agedashi tofu", ":using", "Dashi stock"),
    _L("Takoyaki", ":using", "Dashi stock", ""),
    _L("Okonomiyaki", ":using", "Dashi stock"),
    _L("Kombu", ":a part of", "Dashi stock", key="kombu-in-dashi"),
    _L("Katsuobushi", ":a part of", "Dashi stock"),
    _L("Niboshi", ":a part of", "Dashi stock"),
    _L("Awase dashi", ":a specialization of", "Dashi stock"),
    _L("Shiitake dashi", ":a specialization of", "Dashi stock", "The vegan dashi 🌱"),
    _L("だし（出汁）", ":related to", "Dashi stock"),
    _L("Brodo", ":similar to", "Dashi stock"),
    _L("Fond blanc (white stock)", ":similar to", "Dashi stock"),
    _L("Shoyu ramen", ":using", "Dashi stock", "Some shops blend a niboshi dashi into the soup."),
    # Other cooking links.
    _L("Miso soup", ":using", "Miso"),
    _L("Risotto alla milanese", ":using", "Brodo"),
    _L("Carbonara", ":similar to", "Cacio e pepe"),
    _L("Cacio e pepe", ":using", "Pasta water emulsion"),
    _L("Pasta water emulsion", ":an example of", "Emulsification"),
    _L("Hollandaise", ":an example of", "Emulsification", "Warm, so mind the split! 🥚"),
    _L("Mapo tofu", ":using", "Sichuan peppercorn"),
    _L("Falafel", ":related to", "Hummus"),
    _L("Velouté", ":using", "Fond blanc (white stock)"),
    _L("Maillard reaction", ":related to", "Wok hei"),
    _L("Mirin", ":used in", "Soba tsuyu"),
    _L("Mochi doughnuts (pon de ring)", ":similar to", "Mochi"),
    _L(
        "Sushi rice (shari)", ":using", "Mirin", "Wrong: shari uses rice vinegar.", marker="deleted"
    ),
    _L(
        "Chinese master stock (lu shui)",
        ":similar to",
        "Event sourcing",
        "A pot that is never emptied, only topped up: an append-only log you can taste.",
    ),
    _L("Mise en place", ":similar to", "Architecture decision records"),
    # Software architecture.
    _L("Hexagonal architecture (ports and adapters)", ":similar to", "Onion architecture"),
    _L("Clean architecture", ":similar to", "Onion architecture"),
    _L("Database per service", ":a prerequisite of", "Saga pattern"),
    _L(
        "Saga pattern",
        ":related to",
        "Two-phase commit",
        "Both coordinate a multi-step change; only 2PC holds locks across services.",
        key="saga-vs-2pc",
    ),
    _ChildSpec(
        "saga-vs-2pc",
        "Why not 2PC across microservices",
        "The coordinator is a single point of failure and locks are held "
        "across network calls. Availability suffers first.",
    ),
    _ChildSpec("saga-vs-2pc", "Failure scenario: payment captured, shipment rejected"),
    _ChildSpec(
        "Failure scenario: payment captured, shipment rejected",
        "Compensation: refund the payment",
        "Must be idempotent: it may run twice.",
    ),
    _L("saga-vs-2pc", ":related to", "Compensating transactions"),
    _L("Choreography-based saga", ":opposite of", "Orchestration-based saga"),
    _L("Choreography-based saga", ":using", "Event notification"),
    _L("Transactional outbox", ":used in", "Choreography-based saga"),
    _L("Idempotency keys", ":a prerequisite of", "Retry with exponential backoff"),
    _L("Polling publisher", ":related to", "Idempotency", "At-least-once, so consumers dedupe."),
    _L("Event sourcing", ":a prerequisite of", "CQRS", key="es-before-cqrs"),
    _L(
        "CQRS", ":related to", "es-before-cqrs", "Not really a prerequisite: CQRS works without ES."
    ),
    _L("Projections", ":an example of", "Materialized views"),
    _L("Read models", ":similar to", "Materialized views"),
    _L("Aggregate", ":used in", "Event sourcing"),
    _L("Anti-corruption layer", ":an example of", "Adapters"),
    _L("Bounded context", ":related to", "Service boundaries"),
    _L("Jitter", ":used in", "Cache stampede", "Randomise TTLs so keys don't expire together."),
    _L("Leader election in Raft", ":a specialization of", "Leader election"),
    _L("Replication lag", ":related to", "Read models"),
    _L("Structured logging", ":a prerequisite of", "Distributed tracing"),
    _L("ADR-007: Adopt Redis for context snapshots", ":related to", "Cache-aside"),
    _L("Modular monolith", ":opposite of", "Microservices", marker="neg"),
    _L("Billing service", ":using", "Outbox pattern"),
    # Japanese grammar.
    _L("行く → 行って (exception)", ":an example of", "促音便"),
    _L("ら抜き言葉", ":related to", "Ichidan verbs（一段動詞）"),
    _L("Suffering passive（迷惑の受身）", ":similar to", "〜てしまう / 〜ちゃう"),
    _L("お〜になる", ":opposite of", "お〜する"),
    _L("Resultative 〜ている", ":similar to", "〜てある", "窓が開いている ／ 窓が開けてある"),
    _L("て-form（て形）", ":a prerequisite of", "〜ている"),
    _L("て-form（て形）", ":a prerequisite of", "〜てしまう / 〜ちゃう"),
    _L("〜たところで（逆接）", ":similar to", "〜としても"),
    _L("〜にもかかわらず", ":similar to", "〜ものの"),
    _L("〜わりに（は）", ":similar to", "〜にしては"),
    _L("〜どころか", ":similar to", "〜ばかりか"),
    _L("〜かねない", ":confused with", "〜かねる", "かねない＝可能性がある ／ かねる＝できない"),
    _L("〜ざるを得ない", ":similar to", "〜ずにはいられない"),
    _L("〜からには", ":similar to", "〜以上（は）"),
    _L("で for location of action", ":confused with", "に for location of existence"),
    _L("ぐつぐつ", ":related to", "Oden"),
    _L("うま味", ":related to", "kombu-in-dashi", "昆布のグルタミン酸がだしのうま味の正体。"),
)

# ---------------------------------------------------------------------------
# Deterministic helpers.
# ---------------------------------------------------------------------------


def _digest(*parts: object) -> int:
    """A stable 64-bit number derived from the parts (a stand-in for randomness)."""
    text = "\x1f".join(str(part) for part in parts)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _seconds(delta: dt.timedelta) -> int:
    return delta // _SECOND


def _clamp(moment: dt.datetime) -> dt.datetime:
    return min(max(moment, _FIRST_MOMENT), _LAST_MOMENT)


def _later(moment: dt.datetime, salt: str, min_seconds: int, max_seconds: int) -> dt.datetime:
    span = _digest("later", salt) % (max_seconds - min_seconds + 1)
    return _clamp(moment + dt.timedelta(seconds=min_seconds + span))


def _epoch_order(created: dt.datetime, salt: str) -> int:
    """Doughnut style: epoch milliseconds x 1000, plus a little noise."""
    millis = _seconds(created - _EPOCH) * 1000 + _digest("ms", salt) % 1000
    return millis * 1000 + _digest("us", salt) % 1000


_FALLBACKS: dict[int, tuple[str, ...]] = {
    1: (
        "**{title}**\n\n- 分類：{parent}\n- 復習：まだ",
        "See also *{parent}*. 例文を追加すること。",
        "## {title}\n\nTODO: three example sentences from the textbook.",
    ),
    2: (
        "**{title}**, part of *{parent}*.\n\n- [ ] add a diagram\n- [ ] link an ADR",
        "> {title}: summarise the trade-offs here.\n\nContext: {parent}",
    ),
    3: (
        "**{title}**\n\nServes 2. See *{parent}*.\n\n1. Prep\n2. Cook\n3. Taste and adjust",
        "Notes on {title}: buy fresh, see *{parent}*.",
    ),
}


def _fallback_details(notebook_id: int, title: str, parent_title: str) -> str | None:
    """About 30% None, 8% empty, the rest a templated markdown snippet."""
    bucket = _digest("details", title) % 100
    if bucket < 30:
        return None
    if bucket < 38:
        return ""
    templates = _FALLBACKS[notebook_id]
    return templates[bucket % len(templates)].format(title=title, parent=parent_title)


# ---------------------------------------------------------------------------
# Building.
# ---------------------------------------------------------------------------


class _Line(NamedTuple):
    depth: int
    title: str
    marker: str
    details: str | None


def _parse_outline(text: str) -> list[_Line]:
    lines: list[_Line] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        head, separator, inline = raw.strip().partition(" ::")
        title, _, marker = head.partition(" @")
        details = inline.strip().replace("¶", "\n") if separator else None
        lines.append(_Line(indent // 2, title, marker, details))
    return lines


class _Builder:
    def __init__(self) -> None:
        self.notes: list[SampleNote] = []
        self.names: dict[str, int] = {}
        self.children: dict[int | None, list[int]] = {}
        self.deleted_roots: list[int] = []

    def note(self, note_id: int) -> SampleNote:
        return self.notes[note_id - 1]

    def lookup(self, name: str) -> int:
        if name not in self.names:
            raise KeyError(f"sample note {name!r} is not defined (yet)")
        return self.names[name]

    def register(self, name: str, note_id: int) -> None:
        if name in self.names:
            raise ValueError(f"sample note name {name!r} is used twice")
        self.names[name] = note_id

    def _order(self, parent: int | None, created: dt.datetime, marker: str, salt: str) -> int:
        orders = sorted(self.note(i).sibling_order for i in self.children.get(parent, []))
        if marker == "neg":
            return -(10**12 + _digest("neg", salt) % 10**15)
        if marker == "between" and len(orders) >= 2:
            return (orders[-2] + orders[-1]) // 2
        if marker == "tie" and orders:
            return self.note(self.children[parent][-1]).sibling_order
        return _epoch_order(created, salt)

    def append(
        self,
        parent: int | None,
        title: str,
        details: str | None,
        created: dt.datetime,
        notebook_id: int,
        target: int | None = None,
        marker: str = "",
    ) -> int:
        note_id = len(self.notes) + 1
        order = self._order(parent, created, marker, f"{note_id}:{title}")
        note = SampleNote(
            note_id, parent, target, order, title, details, created, None, notebook_id
        )
        self.notes.append(note)
        self.children.setdefault(parent, []).append(note_id)
        if marker == "deleted":
            self.deleted_roots.append(note_id)
        return note_id


class _NotebookSpec(NamedTuple):
    notebook_id: int
    outline: str
    first_day: dt.datetime
    last_day: dt.datetime


_NOTEBOOKS = (
    _NotebookSpec(1, _JAPANESE, dt.datetime(2021, 1, 3, 8), dt.datetime(2026, 3, 31)),
    _NotebookSpec(2, _SOFTWARE, dt.datetime(2021, 4, 12, 21), dt.datetime(2026, 2, 28)),
    _NotebookSpec(3, _COOKING, dt.datetime(2022, 2, 6, 11), dt.datetime(2026, 4, 30)),
)


def _details_for(
    builder: _Builder, line: _Line, notebook_id: int, parent: int | None
) -> str | None:
    if line.title in _DETAILS:
        return _DETAILS[line.title]
    if line.details is not None or parent is None:
        return line.details
    return _fallback_details(notebook_id, line.title, builder.note(parent).title)


def _add_outline(builder: _Builder, spec: _NotebookSpec) -> None:
    lines = _parse_outline(spec.outline)
    step = _seconds(spec.last_day - spec.first_day) // len(lines)
    stack: list[int] = []
    for index, line in enumerate(lines):
        if line.depth > len(stack) or (line.depth == 0) != (index == 0):
            raise ValueError(f"bad outline indentation at {line.title!r}")
        del stack[line.depth :]
        parent = stack[-1] if stack else None
        planned = spec.first_day + dt.timedelta(seconds=index * step)
        created = _later(planned, line.title, 0, step // 2)
        if parent is not None:
            created = max(created, _later(builder.note(parent).created_at, line.title, 60, 3600))
        details = _details_for(builder, line, spec.notebook_id, parent)
        note_id = builder.append(
            parent, line.title, details, created, spec.notebook_id, marker=line.marker
        )
        builder.register(line.title, note_id)
        stack.append(note_id)


def _add_link(builder: _Builder, spec: _LinkSpec) -> None:
    if not spec.predicate.startswith(":"):
        raise ValueError(f"link title {spec.predicate!r} must start with ':'")
    parent = builder.note(builder.lookup(spec.subject))
    target = builder.note(builder.lookup(spec.target))
    salt = f"{spec.subject}{spec.predicate}{spec.target}"
    base = max(parent.created_at, target.created_at)
    created = _later(base, salt, 3600, 60 * _DAY_SECONDS)
    note_id = builder.append(
        parent.id, spec.predicate, spec.details, created, parent.notebook_id, target.id, spec.marker
    )
    if spec.key is not None:
        builder.register(spec.key, note_id)


def _add_child(builder: _Builder, spec: _ChildSpec) -> None:
    parent = builder.note(builder.lookup(spec.parent))
    created = _later(parent.created_at, spec.title, 600, 30 * _DAY_SECONDS)
    note_id = builder.append(parent.id, spec.title, spec.details, created, parent.notebook_id)
    builder.register(spec.title, note_id)


def _subtree(builder: _Builder, root: int) -> list[int]:
    found = [root]
    for note_id in found:
        found.extend(builder.children.get(note_id, []))
    return found


def _apply_deletions(builder: _Builder) -> None:
    for root in builder.deleted_roots:
        members = _subtree(builder, root)
        newest = max(builder.note(i).created_at for i in members)
        deleted_at = _later(newest, f"deleted:{root}", _DAY_SECONDS, 90 * _DAY_SECONDS)
        for note_id in members:
            note = builder.note(note_id)
            builder.notes[note_id - 1] = note._replace(deleted_at=deleted_at)


@cache
def _build() -> tuple[SampleNote, ...]:
    builder = _Builder()
    for notebook in _NOTEBOOKS:
        _add_outline(builder, notebook)
    for extra in _EXTRAS:
        if isinstance(extra, _LinkSpec):
            _add_link(builder, extra)
        else:
            _add_child(builder, extra)
    _apply_deletions(builder)
    return tuple(builder.notes)


def sample_notes() -> list[SampleNote]:
    """All sample notes, ordered by id; parents always come before their children."""
    return list(_build())


# ---------------------------------------------------------------------------
# Interesting ids, computed from the data.
# ---------------------------------------------------------------------------


def _depth(by_id: dict[int, SampleNote], note: SampleNote) -> int:
    depth = 0
    while note.parent_id is not None:
        note = by_id[note.parent_id]
        depth += 1
    return depth


def _cjk_count(text: str | None) -> int:
    return sum(1 for ch in text or "" if "\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff")


def _focus_ids(notes: list[SampleNote]) -> dict[str, int]:
    by_id = {note.id: note for note in notes}
    live = [note for note in notes if note.deleted_at is None]
    inbound = Counter(n.target_note_id for n in live if n.target_note_id is not None)
    fan_out = Counter(n.parent_id for n in live if n.parent_id is not None)
    parents = set(fan_out)
    leaves = [n for n in live if n.id not in parents and n.target_note_id is None]
    link_note = next(
        n.id
        for n in live
        if n.target_note_id is not None
        and n.parent_id is not None
        and by_id[n.target_note_id].deleted_at is None
    )
    return {
        "hub": min(inbound, key=lambda i: (-inbound[i], i)),
        "monster_parent": min(fan_out, key=lambda i: (-fan_out[i], i)),
        "link_note": link_note,
        "deep_leaf": min(leaves, key=lambda n: (-_depth(by_id, n), n.id)).id,
        "deleted": min(n.id for n in notes if n.deleted_at is not None),
        "cjk_long": max(live, key=lambda n: (_cjk_count(n.details), -n.id)).id,
    }


SAMPLE_FOCUS_IDS: dict[str, int] = _focus_ids(sample_notes())
"""Ids worth pointing a demo or a test at, computed from ``sample_notes()``.

* ``hub``: the live note with the most live inbound link notes.
* ``monster_parent``: the live note with the most live children (about sixty).
* ``link_note``: a live link note whose parent and target are live.
* ``deep_leaf``: the deepest live non-link leaf (depth >= 4; the head is depth 0).
* ``deleted``: the smallest soft-deleted id.
* ``cjk_long``: the live note whose details hold the most CJK characters.
"""
