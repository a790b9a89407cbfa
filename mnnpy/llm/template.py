r"""Chat templates: the jinja template of ``llm_config.json``, rendered with ``jinja2`` if present.

``jinja2`` is optional (the runtime needs NumPy and flatbuffers only): without it, or without a
template, the ChatML layout MNN uses by default (``<|im_start|>role\ncontent<|im_end|>\n``, then
``<|im_start|>assistant\n``) is written instead, when the template is empty or is exactly that
layout; any other template then is NOT_SUPPORT, naming jinja2.
"""

from __future__ import annotations

from mnnpy.errors import InvalidValueError, NotSupportError

__all__ = ["render_chat"]


def _chatml(messages: list[dict[str, str]]) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def render_chat(template: str, messages: list[dict[str, str]], bos: str, eos: str) -> str:
    """The prompt for ``messages`` with ``add_generation_prompt``.

    Raises:
        NotSupportError: for a template that needs ``jinja2`` when it is not installed.
        InvalidValueError: for a template jinja2 cannot render.
    """
    for m in messages:
        if "role" not in m or "content" not in m:
            raise InvalidValueError(f"a chat message needs 'role' and 'content', got {m!r}")
    if not template:
        return _chatml(messages)
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        if "<|im_start|>" in template and "add_generation_prompt" in template:
            return _chatml(messages)
        raise NotSupportError("this chat template needs jinja2 (pip install jinja2)") from None
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template).render(
            messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos
        )
    except jinja2.TemplateError as e:
        raise InvalidValueError(f"chat template: {e}") from e
