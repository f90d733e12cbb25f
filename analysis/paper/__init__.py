"""The paper export beside the report: LaTeX tables (latex), a methods paragraph (methods), the references of
the variants used (bibliography), written together by export."""
