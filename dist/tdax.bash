# bash completion for tdax(1) -- installed by `make install` and the Debian
# package. The commands and options are those of `tdax --help` and each
# command's --help (tests/py/test_install.py checks the commands).
_tdax()
{
	local cur prev words cword
	_init_completion || return
	local commands="run recover status top metrics exporter get set pin device trace sim bench config --version --help"
	if ((cword == 1)); then
		COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		return
	fi
	case $prev in
	--device | --trace)
		_filedir
		return
		;;
	--policy)
		COMPREPLY=($(compgen -W "thesis adaptive always never" -- "$cur"))
		return
		;;
	--mode)
		COMPREPLY=($(compgen -W "coherent bypass" -- "$cur"))
		return
		;;
	--intercept)
		COMPREPLY=($(compgen -W "auto libc rewrite syscall" -- "$cur"))
		return
		;;
	--backend)
		COMPREPLY=($(compgen -W "emulated fsdax devdax" -- "$cur"))
		return
		;;
	esac
	local opts
	case ${words[1]} in
	run)
		local i
		for ((i = 2; i < cword; i++)); do
			if [[ ${words[i]} == -- ]]; then
				_command_offset $((i + 1))
				return
			fi
		done
		opts="--device --mode --policy --intercept --quiet --verbose --trace --allow-shared --help --"
		;;
	recover) opts="--device --configured --power-failure --discard-unmatched --json --help" ;;
	config)
		if ((cword == 2)); then
			COMPREPLY=($(compgen -W "check show --help" -- "$cur"))
			return
		fi
		_filedir
		return
		;;
	status) opts="--device --json --verbose --help" ;;
	top) opts="--device --interval --count --verbose --help" ;;
	get | set | metrics) opts="--device --help" ;;
	pin) opts="--device --range --for --allow-shared --help" ;;
	exporter) opts="--device --listen --allow-shared --help" ;;
	device)
		if ((cword == 2)); then
			COMPREPLY=($(compgen -W "create info destroy" -- "$cur"))
			return
		fi
		case ${words[2]} in
		create) opts="--device --backend --size --persist-cost --bandwidth --segment-size --owner --mode --force --help" ;;
		info) opts="--device --json --help" ;;
		destroy) opts="--device --force --help" ;;
		esac
		;;
	trace)
		if ((cword == 2)); then
			COMPREPLY=($(compgen -W "info dump" -- "$cur"))
			return
		fi
		_filedir
		return
		;;
	sim) opts="--policy --set --capacity --selection --wb-age-ms --cost --sweep --json --out --help" ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	else
		_filedir
	fi
} && complete -F _tdax tdax
