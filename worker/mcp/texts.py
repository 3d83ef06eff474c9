"""What agents see of the MCP tools: their descriptions, era by era.

``get_note_graph``'s description and its ``tokenLimit`` description are Doughnut's own, copied from
its ``mcp-server/src/tools/get-note-graph.ts`` at the commits named below and never paraphrased: an
agent that knows Doughnut's tool must meet the same words here. Doughnut changed them when its
``/graph`` stopped answering the GraphRAG result and answered the focus context instead, so there are
two eras, and a server lists the texts of the era whose JSON its strategy computes
(:func:`texts_for`): the tree model's result (2025) or the wiki model's focus context (2026). The
markdown tool is this service's own; its description promises the same notes as ``get_note_graph``.
Plain strings only: :mod:`worker.mcp.server` builds the SDK's tool list from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag import get_strategy

__all__ = ["NOTE_ID_DESCRIPTION", "TEXTS_2025", "TEXTS_2026", "ToolTexts", "texts_for"]


@dataclass(frozen=True, slots=True)
class ToolTexts:
    """Doughnut's texts of one era: tool description, tokenLimit description, backend-error prefix."""

    graph_description: str
    token_limit_description: str
    retrieval_error: str
    markdown_description: str


NOTE_ID_DESCRIPTION = ("Numeric ID of the note to explore. Obtain this from 'find_most_relevant_note' "
                       "results or user-provided ID.")

MARKDOWN_DESCRIPTION = """\
Retrieves the same context as 'get_note_graph' as markdown to read rather than JSON to parse: the focus \
note (title, or subject, predicate and object for a link note; its contextual path, children, siblings, \
inbound references and details), then the related notes in ranking order, most relevant first, each \
with its relation to the focus note (e.g. "Younger sibling (YoungerSibling)") and its details. Details \
are in fenced blocks; titles are quoted like JSON strings.

Obtain the note ID and choose the token limit as for 'get_note_graph': the same notes are selected \
(the budget is counted on their JSON, so the markdown is somewhat longer)."""

MARKDOWN_DESCRIPTION_2026 = """\
Retrieves the same focus context as 'get_note_graph' as the markdown Doughnut gives its own AI \
assistant: a <focus_context> block with the focus note (title, notebook, folder path, its outgoing \
links, inbound references and a sample of folder peers, and its content), then the related notes \
(each with its depth and the retrieval path of wiki links that reached it) and their content in \
fenced blocks.

Obtain the note ID and choose the token limit as for 'get_note_graph': the same notes are selected."""


#: Doughnut's texts while its ``/graph`` answered the GraphRAGResult this service computes (the tool
#: as of commit 38a7de7fbe, the last before FocusContext replaced GraphRAG).
TEXTS_2025 = ToolTexts(
    graph_description='''Retrieves the note graph - a specific note along with its surrounding context and relationships.

What This Returns:
- Focus note: The requested note with full details
- Parent notes: Hierarchical path showing where this note sits in the knowledge structure
- Child notes: Direct sub-notes under this note
- Sibling notes: Other notes at the same level
- Related notes: Semantically connected notes from other parts of the knowledge base

Use Cases:
- Understanding note context and position in knowledge hierarchy
- Finding related information after a search
- Exploring knowledge connections and discovering new insights
- Building comprehensive understanding of a topic

You MUST obtain a valid note ID first using 'find_most_relevant_note' unless the user explicitly provides a numeric note ID.
You MUST provide a valid token limit to ensure the response fits within constraints alongside with the note ID. Your choice of the limit should consider the currently available context window. Example of a valid token limits:
1. If the note is short and the context window is large, you might set a higher token limit (e.g., 5000 tokens).
2. If the note is long or the context window is small, you might need to set a lower token limit (e.g., 500 tokens).

Navigation Pattern:
1. Use 'find_most_relevant_note' to find relevant notes
2. Extract note ID from search results
3. Use this tool to explore relationships and context
4. Follow related notes for deeper exploration''',  # noqa: E501
    token_limit_description=(
        "A valid token limit to ensure the response fits within constraints alongside with the note ID. "
        "Your choice of the limit should consider the currently available context window."
    ),
    retrieval_error="Graph retrieval error",
    markdown_description=MARKDOWN_DESCRIPTION,
)

#: Doughnut's texts at commit b2c0268c09, describing its FocusContext JSON (the wiki model).
TEXTS_2026 = ToolTexts(
    graph_description='''Retrieves structured **focus context** for one note: the focus note plus related notes discovered through wiki links, inbound references, and sampled folder peers.

What this returns (JSON):
- **focusNote** — The requested note (depth 0) with title, notebook, folder path, truncated **content** when needed, and lightweight lists: **outgoingLinks** and **inboundReferences** (wiki-style link strings), plus **sampleSiblings** (a small capped sample of peers in the same folder or notebook root).
- **relatedNotes** — Notes reached within the post-focus share of the combined token budget and max traversal depth. Each entry includes **depth**, **retrievalPath** (how the note was reached from the focus), and truncated **content** when needed.

Use cases:
- Inspect how a note connects to the rest of the notebook before answering questions about it.
- After search, pull bounded context around a candidate note without loading the whole notebook.

You MUST obtain a valid note ID first using 'find_most_relevant_note' unless the user explicitly provides a numeric note ID.
You MUST provide a valid token limit (combined budget for focus plus related note bodies). Example choices:
1. Short focus note and a large context window → higher limit (e.g., 5000).
2. Long focus note or a small context window → lower limit (e.g., 500); a large focus body consumes budget before related notes are included.

Navigation pattern:
1. Use 'find_most_relevant_note' to find relevant notes
2. Extract note ID from search results
3. Use this tool to load focus context around that note
4. Follow **outgoingLinks** / **relatedNotes** titles for deeper exploration if needed''',  # noqa: E501
    token_limit_description=(
        "Approximate token budget for the focus note body plus all related note bodies combined. "
        "Pick a value that fits your remaining context window."
    ),
    retrieval_error="Focus context retrieval error",
    markdown_description=MARKDOWN_DESCRIPTION_2026,
)


def texts_for(strategy: str) -> ToolTexts:
    """Doughnut's texts of the era whose JSON ``strategy`` computes."""
    return TEXTS_2026 if get_strategy(strategy).model == "wiki" else TEXTS_2025
