# bash completion for heaptrail. The commands and each command's options come
# from heaptrail's own --help, so they are never out of date.
_heaptrail() {
  local cur=${COMP_WORDS[COMP_CWORD]} bin=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]}
  local commands
  commands=$("$bin" --help 2>/dev/null | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
  if ((COMP_CWORD == 1)); then
    COMPREPLY=($(compgen -W "$commands help --help --version" -- "$cur"))
  elif [[ $cmd == help ]] && ((COMP_CWORD == 2)); then
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$("$bin" "$cmd" --help 2>/dev/null |
      grep -oE -- '--[a-zA-Z][-a-zA-Z]*' | sort -u)" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _heaptrail heaptrail
