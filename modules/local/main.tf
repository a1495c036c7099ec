# Built-in resources only: runs anywhere without a provider download. Each machine is a
# terraform_data whose input changes when its user_data does; addresses are fake, taken from
# the documentation ranges by the machine's index in name order.

terraform {
  required_version = ">= 1.4"
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret)."
  type = map(object({
    role      = string
    user_data = string
    size      = optional(string)
    image     = optional(string)
  }))
  sensitive = true
}

variable "apply_delay_seconds" {
  description = "Seconds each machine's creation takes, so tests can cancel mid-apply."
  type        = number
  default     = 0
  validation {
    condition     = var.apply_delay_seconds >= 0 && var.apply_delay_seconds <= 3600
    error_message = "apply_delay_seconds must be between 0 and 3600."
  }
}

locals {
  # Names are not secret; only the user_data in the map is.
  names = sort(nonsensitive(keys(var.machines)))
  index = { for i, name in local.names : name => i }
}

resource "terraform_data" "machine" {
  for_each = toset(local.names)

  input = {
    cluster        = var.cluster_name
    role           = nonsensitive(var.machines[each.key].role)
    user_data_hash = nonsensitive(sha256(var.machines[each.key].user_data))
  }

  provisioner "local-exec" {
    # exec: the sleep itself gets tofu's interrupt, no orphaned child is left behind.
    command = "exec sleep ${var.apply_delay_seconds}"
  }
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, m in terraform_data.machine : name => {
      ipv4 = cidrhost("192.0.2.0/24", local.index[name] + 10)
      ipv6 = cidrhost("2001:db8::/64", local.index[name] + 16)
    }
  }
}
